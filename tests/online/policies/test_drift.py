"""Changes in an action's rewards: the held-out error test, and the tree-ensemble policy that
forgets an action's events before a change it found."""

from __future__ import annotations

import json

import numpy as np
import pytest

from online.policies.drift import ResidualMonitor
from online.policies.error_rings import ErrorPool
from online.policies.trees import TreeEnsemblePolicy
from tests.online.policies.test_trees_policy import ADS, favorite_stream, play, small


def shifted(x):
    """After the change: the action after the favorite earns (every action's rewards change)."""
    return ADS[(ADS.index(x["favorite"]) + 1) % len(ADS)]


# -- the test on held-out errors -----------------------------------------------------------------


def test_monitor_raises_no_alarm_on_errors_of_mean_zero():
    """Bounded errors of mean zero, the widest spread the bound allows (uniform on [-1, 1]
    and +-1 coin flips, width 2), 26 actions: no false alarm in 300,000 errors."""
    rng = np.random.default_rng(1)
    monitor = ResidualMonitor(26, delta=0.01)
    errors = np.concatenate([rng.uniform(-1, 1, 150_000), rng.choice([-1.0, 1.0], 150_000)])
    found = [monitor.observe(t % 26, e, t, 2.0) for t, e in enumerate(errors.tolist())]
    assert not any(c is not None for c in found)


def test_watch_raises_no_alarm_on_unbiased_predictions_of_clicks():
    """Clicks drawn at the predicted rate: each error lies in [-p, 1 - p], the width the bound
    takes (at p = 0.5 the widest spread, +-0.5). No false alarm in 300,000 events."""
    rng = np.random.default_rng(5)
    monitor = ResidualMonitor(26, delta=0.01)
    p = np.concatenate([np.full(150_000, 0.5), rng.uniform(0, 1, 150_000)])
    clicks = (rng.random(len(p)) < p).astype(float)
    found = [monitor.watch(t % 26, c, q, t) for t, (c, q) in enumerate(zip(clicks, p))]
    assert not any(c is not None for c in found)


def test_watch_finds_an_action_that_stops_earning_within_32_of_its_errors():
    """Predicted 0.9 and clicked at that rate for 5,000 events; then no click: the errors'
    mean -0.9 is past the threshold at 32 errors (0.69 of the range at t = 10^5; the bound for
    errors anywhere in [-1, 1] would need 128)."""
    rng = np.random.default_rng(6)
    monitor = ResidualMonitor(1, delta=0.01)
    for t in range(100_000):
        assert monitor.watch(0, float(rng.random() < 0.9), 0.9, t) is None
    for t in range(100_000, 100_100):
        cut = monitor.watch(0, 0.0, 0.9, t)
        if cut is not None:
            break
    assert t - 100_000 < 32 and 100_000 - 3 <= cut <= 100_000


@pytest.mark.parametrize("shift", [1.0, -0.5])
def test_monitor_finds_a_shift_and_where_it_started(shift):
    rng = np.random.default_rng(2)
    monitor = ResidualMonitor(3, delta=0.01)
    for t in range(6000):
        assert monitor.observe(t % 3, float(rng.uniform(-0.5, 0.5)), t, 1.0) is None
    for t in range(6000, 12_000):
        cut = monitor.observe(1, float(rng.uniform(-0.5, 0.5)) + shift, t, 1.0)
        if cut is not None:
            break
    assert cut is not None and t < 6000 + 600  # a shift of half the error range: < 600 errors
    # where it started, to within 50 of the action's errors (it has one event in three; the
    # split is the CUSUM's, whose slope before the change is shallow: ~2,000 errors against ~100)
    assert 6000 - 150 <= cut <= 6000 + 15
    assert monitor.observe(1, shift, t + 1, 1.0) is None  # cleared: the test starts over


def test_monitor_scale_bounds_the_errors():
    """Errors beyond ``scale`` count as ``scale``: one wild value cannot raise an alarm."""
    monitor = ResidualMonitor(1)
    for t in range(100):
        assert monitor.observe(0, 0.0, t, 1.0) is None
    assert monitor.observe(0, 1e9, 100, 1.0) is None


def test_monitor_sizes_each_actions_ring_to_its_errors():
    """An action played 10 times costs 16 slots, not the longest length's 512."""
    monitor = ResidualMonitor(3)
    for t, k in enumerate([0] * 5000 + [1] * 200 + [2] * 10):
        assert monitor.observe(k, 0.0, t, 1.0) is None
    state = monitor.to_state()
    assert state["capacity"].tolist() == [512, 256, 16]
    assert len(state["errors"]) == 512 + 256 + 16


@pytest.mark.parametrize("version", [1, 2])
def test_monitor_reads_an_older_state_as_this_versions_test(version):
    """A version-1 state (a 2,048-slot ring per action) or version-2 state (blocks of up to
    2,048; both tested lengths 64 to 2,048 with the bound for errors anywhere in [-R, R]) goes
    on as this version's test: lengths a quarter as long, the same thresholds. It is the state
    this version would have after the same errors, and makes the same decisions after."""
    rng = np.random.default_rng(4)
    monitor = ResidualMonitor(3)
    played = {0: 5000, 1: 700, 2: 10}
    stream = [(k, float(rng.normal(0, 0.2))) for k, n in played.items() for _ in range(n)]
    rng.shuffle(stream)
    rows = np.zeros((3, 2048), np.float32), np.zeros((3, 2048), np.int64)
    for t, (k, e) in enumerate(stream):
        assert monitor.observe(k, e, t, 1.0) is None
        n = int(monitor.to_state()["count"][k]) - 1
        rows[0][k, n % 2048], rows[1][k, n % 2048] = e, t  # the version-1 layout
    state = monitor.to_state()
    lengths = [64, 128, 256, 512, 1024, 2048]
    count = np.array(list(played.values()))
    ordered = [np.roll(rows[0][k], -(n % 2048))[-min(n, 2048):] if n > 2048 else rows[0][k, :n]
               for k, n in enumerate(count)]  # oldest first
    sums = [[float(np.sum(e[-m:], dtype=np.float64)) for m in lengths] for e in ordered]
    old = {**state, "version": 1, "lengths": lengths, "count": count, "sums": sums,
           "errors": rows[0], "events": rows[1]}
    del old["capacity"]
    if version == 2:
        old = {**old, "version": 2, **ErrorPool.from_rows(rows[0], rows[1], count).to_state()}
    clone = ResidualMonitor.from_state(json.loads(json.dumps(old, default=lambda a: a.tolist())))
    for key, value in clone.to_state().items():
        if key == "sums":  # (added in another order)
            assert np.allclose(value, state[key])
        else:
            assert np.array_equal(value, state[key]), key
    cuts = []
    for t in range(len(stream), len(stream) + 3000):
        k = t % 3
        e = float(rng.normal(0, 0.2)) - 0.6 * (k == 1 and t > len(stream) + 1500)
        cuts.append(monitor.observe(k, e, t, 1.0))
        assert clone.observe(k, e, t, 1.0) == cuts[-1]
    assert any(c is not None for c in cuts)  # action 1's change found, by both alike


def test_a_monitor_restored_before_any_action_grows_as_a_new_one():
    clone = ResidualMonitor.from_state(ResidualMonitor(0).to_state())
    clone.resize(3)
    assert [clone.observe(k, 0.1, k, 1.0) for k in range(3)] == [None] * 3
    assert clone.to_state()["capacity"].tolist() == [16, 16, 16]


def test_monitor_state_round_trip_continues_the_same_tests():
    rng = np.random.default_rng(3)
    monitor = ResidualMonitor(2)
    for t in range(3000):
        monitor.observe(t % 2, float(rng.normal(0, 0.2)), t, 1.0)
    clone = ResidualMonitor.from_state(json.loads(json.dumps(
        monitor.to_state(), default=lambda a: a.tolist())))
    for t in range(3000, 4000):
        e = float(rng.normal(0, 0.2)) - 0.7 * (t >= 3500)
        assert clone.observe(t % 2, e, t, 1.0) == monitor.observe(t % 2, e, t, 1.0)


def test_monitor_rejects_a_bad_delta():
    with pytest.raises(ValueError, match="delta"):
        ResidualMonitor(1, delta=0.0)
    with pytest.raises(ValueError, match="drift_delta"):
        TreeEnsemblePolicy(drift_delta=1.5)


def test_monitor_rejects_errors_without_a_width():
    monitor = ResidualMonitor(1)
    for width in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="width"):
            monitor.observe(0, 0.1, 0, width)


# -- the tree-ensemble policy ----------------------------------------------------------------------


def test_trees_earn_again_soon_after_every_action_changes():
    """The five-action problem; at event 3,000 the action after the favorite becomes the one that
    earns. With the test the policy earns >= 0.9 again over events 4,000-5,000; with the window
    alone it earns almost nothing there (it keeps the 3,000 events of the old world)."""
    contexts = list(favorite_stream(5000, seed=4))

    def run(policy):
        before = play(policy, contexts[:3000])
        after = play(policy, contexts[3000:], best=shifted)
        return before, after

    before, after = run(small())
    assert before[2000:].mean() >= 0.9
    assert after[1000:2000].mean() >= 0.9
    _, frozen = run(small(drift_delta=None))
    assert frozen[1000:2000].mean() < 0.5


def test_trees_refit_after_a_change_as_a_new_policy_does():
    """Every action changes at event 4,000. The fits then take only the events since the change,
    and the schedule starts again from those: refits come close together as they do for a new
    policy (the kept events grow by a quarter between them), not once a quarter of the whole
    window's 4,000 events has come (one refit in the 1,400 events after the change's own)."""
    contexts = list(favorite_stream(5500, seed=4))
    policy = small()
    play(policy, contexts[:4000])
    refits = []
    for i, x in enumerate(contexts[4000:]):
        fitted = policy._fitted_events
        play(policy, [x], best=shifted)
        if policy._fitted_events != fitted:
            refits.append(i)
    assert policy.n_changes == len(ADS)
    first = refits[0]  # the change's refit, at once
    assert policy._fit_rows <= 1500  # the last fit took the events since the change only
    assert len([i for i in refits if first < i <= first + 1400]) >= 5


def test_trees_measure_the_share_r_on_the_new_models_predictions_after_a_change():
    """Every action changes at event 4,000. The old models' predictions of the new rewards (all
    wrong) say nothing of how well the models fit now: the share R and the trees' weights are
    measured without them, so R is back near its level of before the change soon after the
    refits on the new events (0.94-0.96 from ~500 events on; 0 until ~1,300 with them)."""
    contexts = list(favorite_stream(4700, seed=4))
    policy = small()
    play(policy, contexts[:4000])
    assert policy.explained > 0.9
    play(policy, contexts[4000:], best=shifted)
    assert policy.n_changes == len(ADS) and policy.explained > 0.5


def test_trees_keep_no_prediction_of_models_older_than_the_change_found():
    """As the service runs them: refits by the trainer, not inline. Until the refit that a
    change makes due is in use, the window keeps no held-out prediction of the changed actions'
    events (the models that made them predate the change); the refit's own copy leaves out
    those of the events from the change's start on too."""
    contexts = list(favorite_stream(4400, seed=4))
    policy = small(auto_refit=False)

    def trainer():
        while policy.refit_due():
            policy.finish_refit(policy.start_refit()())

    for lo in range(0, 4000, 100):
        play(policy, contexts[lo:lo + 100])
        trainer()
    play(policy, contexts[4000:], best=shifted)  # the change is found; no refit yet
    assert policy.n_changes >= 1 and policy.refit_due()
    _, actions, _, _ = policy._window.arrays()
    events = policy._window.n_events - len(actions) + np.arange(len(actions))
    found = np.pad(policy._drift.cut_at, (0, len(ADS)))[actions]
    held = policy._window.held_out()
    after = (found > 0) & (events >= found)
    assert after.any() and np.isnan(held[after]).all()
    # the old models' predictions of the old rewards stay (the fits leave those events out)
    assert np.isfinite(held[(events >= 1000) & (events < 4000)]).all()
    job = policy.start_refit()
    since = np.pad(policy._drift.since, (0, len(ADS)))[job.actions]
    assert (since > 0).sum() > 100 and np.isnan(job.held_out[since > 0]).all()
    policy.finish_refit(job())
    play(policy, contexts[4300:], best=shifted)  # the new models' predictions are kept
    held = policy._window.held_out()
    assert np.isfinite(held[-100:]).all()


def test_trees_find_no_change_in_a_stationary_stream():
    policy = small()
    rewards = play(policy, favorite_stream(6000, seed=5))
    assert policy.n_changes == 0 and rewards[3000:].mean() >= 0.95


def test_trees_fit_an_action_only_on_its_events_since_its_change():
    policy = small()
    contexts = list(favorite_stream(3600, seed=6))
    play(policy, contexts[:3000])
    play(policy, contexts[3000:], best=shifted)
    assert policy.n_changes >= 1
    since = policy._drift.since
    assert (since[since > 0] >= 2900).all()  # each cut near the change, none before it
    job = policy.start_refit()
    events = policy._window.n_events - len(policy._window) + np.arange(len(policy._window))
    _, actions, _, _ = policy._window.arrays()
    kept = events >= np.pad(since, (0, 5 - len(since)))[actions]
    assert len(job.actions) == kept.sum() < len(actions)


def test_trees_state_round_trip_keeps_what_the_changes_left_out():
    policy = small()
    contexts = list(favorite_stream(3600, seed=6))
    play(policy, contexts[:3000])
    play(policy, contexts[3000:], best=shifted)
    state = json.loads(json.dumps(policy.to_state(), default=lambda a: a.tolist()))
    clone = TreeEnsemblePolicy.from_state(state)
    assert clone.n_changes == policy.n_changes
    np.testing.assert_array_equal(clone._drift.since, policy._drift.since)
    more = list(favorite_stream(400, seed=7))
    assert (play(clone, more, best=shifted) == play(policy, more, best=shifted)).all()
    assert clone.n_changes == policy.n_changes


def test_trees_forget_only_the_actions_that_changed():
    """A campaign ends: from event 3,000 on, a4 earns in a3's place (a3 earns nothing). a3's
    events before the change are left out; a1, a2 and a5, whose rewards did not change, keep
    theirs, and the policy earns again on a3's contexts."""
    contexts = list(favorite_stream(6000, seed=8))
    policy = small()
    play(policy, contexts[:3000])
    moved = {"a3": "a4"}
    after = play(policy, contexts[3000:], best=lambda x: moved.get(x["favorite"], x["favorite"]))
    since = dict(zip(ADS, np.pad(policy._drift.since, (0, 5 - len(policy._drift.since)))))
    assert since["a3"] >= 2900
    assert since["a1"] == since["a2"] == since["a5"] == 0
    on_a3 = np.array([x["favorite"] == "a3" for x in contexts[3000:]])
    assert after[2000:][on_a3[2000:]].mean() >= 0.85


# -- LinUCB ----------------------------------------------------------------------------------------


def test_linucb_restarts_the_actions_that_changed():
    """LinUCB sums every event since the start; with the test, the actions found changed start
    afresh and the policy earns again within 500 events of every action's reward moving (the
    paper's policy takes ~2,000 for the old sums to be outweighed)."""
    from online.policies.linucb import LinUCB

    contexts = list(favorite_stream(6000, seed=9))

    def run(**params):
        policy = LinUCB(seed=2, **params)
        for a in ADS:
            policy.add_action(a)
        play(policy, contexts[:3000])
        return policy, play(policy, contexts[3000:], best=shifted)

    policy, after = run()
    assert policy.n_changes >= len(ADS) and after[500:1500].mean() >= 0.9
    frozen, stuck = run(drift_delta=None)
    assert frozen.n_changes == 0 and stuck[500:1500].mean() < 0.5
    # the state keeps the test's arrays: a clone goes on as the original
    clone = LinUCB.from_state(json.loads(json.dumps(policy.to_state(),
                                                    default=lambda a: a.tolist())))
    more = list(favorite_stream(300, seed=10))
    assert (play(clone, more) == play(policy, more)).all()
    assert clone.n_changes == policy.n_changes


def test_auto_shows_each_candidates_changes_also_from_a_serving_copy():
    """``evaluations()`` counts the changes each candidate found (None for Bandit Forest, which
    does not watch); the serving snapshot (no statistics) keeps the counts. LinUCB serves: a
    candidate sees the change only in the actions the serving one plays, and serving trees
    find it after ~10 errors per action, too few for LinUCB's own test."""
    from online.policies.auto import AutoPolicy
    from online.policies.registry import make_policy

    policy = make_policy("auto", actions=ADS, seed=1, candidates=[
        {"kind": "linucb"}, {"kind": "trees"}, {"kind": "bandit-forest"}])
    contexts = list(favorite_stream(4500, seed=11))
    play(policy, contexts[:3000])
    play(policy, contexts[3000:], best=shifted)
    changes = {e["kind"]: e["changes"] for e in policy.evaluations()}
    assert changes["trees"] >= len(ADS) and changes["linucb"] >= len(ADS)
    assert changes["bandit-forest"] is None
    state = json.loads(json.dumps(policy.to_state(statistics=False),
                                  default=lambda a: a.tolist()))
    served = AutoPolicy.from_state(state)
    assert {e["kind"]: e["changes"] for e in served.evaluations()} == changes
