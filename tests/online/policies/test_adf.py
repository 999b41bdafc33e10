"""ActionFeaturePolicy: one model of the context and the actions' own features."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from online.policies.adf import (
    CONTEXT_SEED,
    ActionFeaturePolicy,
    Rule,
    _context_tokens,
    _phi,
    hashed,
    linear_predict,
    nag_step,
)

TOPICS = ["sport", "politics", "science", "music", "travel"]
# Personalizer's default learning settings, as the service maps them
PERSONALIZER = {"epsilon": 0.2, "power_t": 0, "learning_rate": 0.001, "cb_type": "mtr",
                "interactions": ["::"]}


def articles(day: int, n: int = 5) -> dict:
    return {f"d{day}-{i}": {"topic": TOPICS[i % len(TOPICS)], "words": 3.0 + i}
            for i in range(n)}


def read(policy: ActionFeaturePolicy, days: int, seed: int = 0, features: bool = True,
         per_day: int = 100) -> list[float]:
    """Days of new articles; a user reads the article of the topic she likes."""
    rng = random.Random(seed)
    earned = []
    for t in range(days * per_day):
        today = articles(t // per_day)
        x = {"likes": rng.choice(TOPICS), "hour": float(rng.randrange(24))}
        d = policy.decide(x, actions=list(today), action_features=today if features else None)
        reward = float(today[d.action]["topic"] == x["likes"])
        policy.learn_one(x, d.action, reward, d.probability,
                         today[d.action] if features else None)
        earned.append(reward)
    return earned


def uniform_log(n: int, per_day: int, seed: int) -> list[tuple]:
    """``n`` events of days of new articles played uniformly (probability 1/5), each with its
    day's offer and the offered articles' features (``learn_many``'s six items)."""
    rng = random.Random(seed)
    events = []
    for t in range(n):
        today = articles(t // per_day)
        x = {"likes": rng.choice(TOPICS)}
        a = rng.choice(list(today))
        events.append((x, a, float(today[a]["topic"] == x["likes"]), 0.2, list(today), today))
    return events


def first_of_each_day(earned: list[float], days: range, n: int = 10) -> float:
    return float(np.mean([earned[day * 100 + i] for day in days for i in range(n)]))


def test_a_new_article_is_scored_from_its_features():
    policy = ActionFeaturePolicy(seed=0)
    earned = read(policy, days=20)
    # an article's first events: 0.2 for a uniform pick
    assert first_of_each_day(earned, range(10, 20)) > 0.85
    fresh = {"new-a": {"topic": "science"}, "new-b": {"topic": "music"},
             "new-c": {"topic": "travel"}}
    for likes in ("science", "music", "travel"):
        d = policy.decide({"likes": likes, "hour": 3.0}, actions=list(fresh),
                          action_features=fresh)
        best = max(d.probabilities, key=d.probabilities.get)
        assert fresh[best]["topic"] == likes and d.probabilities[best] > 0.5


def test_without_features_new_articles_are_unseen_and_tried_evenly():
    policy = ActionFeaturePolicy(seed=0)
    earned = read(policy, days=20, features=False)
    assert first_of_each_day(earned, range(10, 20)) < 0.4  # nothing carries over
    d = policy.decide({"likes": "music"}, actions=["new-a", "new-b"])
    assert d.probabilities == {"new-a": 0.5, "new-b": 0.5}


def test_the_last_features_an_action_came_with_are_kept():
    policy = ActionFeaturePolicy(seed=0)
    read(policy, days=10)
    policy.set_action_features("kept-music", {"topic": "music"})
    policy.set_action_features("kept-sport", {"topic": "sport"})
    assert policy.action_features("kept-music") == {"topic": "music"}
    d = policy.decide({"likes": "music", "hour": 1.0}, actions=["kept-music", "kept-sport"])
    assert d.probabilities["kept-music"] > 0.5
    # a call's features win over the kept ones
    d = policy.decide({"likes": "music", "hour": 1.0}, actions=["kept-music", "kept-sport"],
                      action_features={"kept-sport": {"topic": "music"},
                                       "kept-music": {"topic": "sport"}})
    assert d.probabilities["kept-sport"] > 0.5


def test_learn_many_reads_the_offered_features_by_id():
    one, many = ActionFeaturePolicy(seed=1), ActionFeaturePolicy(seed=1)
    events = uniform_log(600, per_day=50, seed=3)
    for x, a, r, p, _, today in events:
        one.learn_one(x, a, r, p, today[a])
    assert many.learn_many(events) == 600
    x = {"likes": "music"}
    fresh = articles(99)
    assert np.array_equal(one.scores(x, list(fresh), fresh), many.scores(x, list(fresh), fresh))
    assert one.action_features("d11-3") == many.action_features("d11-3") == articles(11)["d11-3"]


def test_a_step_moves_the_prediction_towards_the_reward_never_past_it():
    """Twenty fresh weights: a plain AdaGrad step moves each by the full rate, and the
    prediction by ~h times the error (past the reward); the importance-aware step moves it
    1 - e^-h of the way."""
    policy = ActionFeaturePolicy(seed=0)
    x = {f"f{i}": 1.0 for i in range(4)}
    z = {"topic": "sport", "lang": "en", "len": 2.0}
    before = policy.scores(x, ["a"], {"a": z})[0]
    policy.learn_one(x, "a", 1.0, 1.0, z)
    after = policy.scores(x, ["a"], {"a": z})[0]
    assert before == 0.0 and 0.5 < after < 1.0


@pytest.mark.parametrize("power_t", [0.5, 0.0])
def test_a_number_learns_alike_at_any_scale(power_t):
    """NAG: the weights are in the units of each feature's largest value, so a price sent
    in cents decides as one sent in euros (powers of 2 here, so that the match is exact up
    to rounding); with AdaGrad's power_t and with Personalizer's 0."""
    small = ActionFeaturePolicy(seed=4, power_t=power_t)
    large = ActionFeaturePolicy(seed=4, power_t=power_t)
    rng = np.random.default_rng(0)
    for _ in range(400):
        price = float(rng.uniform(1, 5))
        a = str(rng.integers(3))
        reward = float(rng.random() < (0.2 + 0.1 * price if a == "0" else 0.5))
        small.learn_one({"price": price, "device": "m"}, a, reward, 0.3)
        large.learn_one({"price": price * 1024.0, "device": "m"}, a, reward, 0.3)
    for price in (1.5, 4.5):
        s = small.scores({"price": price, "device": "m"}, ["0", "1", "2"])
        big = large.scores({"price": price * 1024.0, "device": "m"}, ["0", "1", "2"])
        assert np.allclose(s, big, rtol=1e-9, atol=1e-12)


def test_a_larger_value_rescales_a_weight_after_the_prediction():
    """NAG keeps each weight in the units of 1 / its feature's largest |value|. In VW's order
    (``gd``'s predict, then its update): the error is the prediction's with the weights as
    they are; then 4 coming after 1 puts ``p``'s weights in the units of 1 / 4, and a line
    predicted exactly changes nothing (not t, N nor the scales)."""
    policy = ActionFeaturePolicy(seed=0)
    policy.learn_one({"p": 1.0}, "a", 1.0, 1.0)
    context, action = _context_tokens({"p": 4.0}), policy._action_tokens("a", None)
    slots = _phi(context, action, policy._cross, policy._shift)[0]
    assert policy._weights.s[slots].tolist() == [1.0, 1.0, 1.0, 1.0]  # bias, p, id, p x id
    as_they_are = linear_predict(context, action, policy._weights.w, 0.0, policy._cross,
                                 policy._shift)
    totals = policy._totals.copy()
    exact = nag_step(context, action, as_they_are, policy._weights, policy._totals,
                     Rule(policy.learning_rate, 0.5, 1.0), policy._cross, policy._shift)
    assert exact == as_they_are and np.array_equal(policy._totals, totals)
    assert policy._weights.s[slots].tolist() == [1.0, 1.0, 1.0, 1.0]  # (nothing changed)
    predicted = nag_step(context, action, 0.0, policy._weights, policy._totals,
                         Rule(policy.learning_rate, 0.5, 1.0), policy._cross, policy._shift)
    assert predicted == as_they_are  # (not the rescaled weights: those predict less)
    assert policy._weights.s[slots].tolist() == [1.0, 4.0, 1.0, 4.0]
    assert policy._totals[0] == totals[0] + 1.0


# VW 9.11.9's scores (-partial prediction) after the 30 events of ``_vw_events`` as ``--cb_adf
# --cb_type T -q sa -l 0.5`` (VW's defaults otherwise: predictions clamped to the labels' range
# when learned) learns them, the lines ``shared |s u=U v:V`` and ``|a idK f:K+1``; per context
# (u, v) in (0, 1), (0, 4), (1, 1), ..., (2, 4), each action's score (bench/policies/README.md,
# "adf learns each line in VW's gd order").
VW_SCORES = {
    ("mtr", 0.5): [[0.675906, 0.296468, 0.585552], [0.679803, 0.379203, 0.713149],
                   [0.365235, 0.495262, 0.426034], [0.369132, 0.577996, 0.553631],
                   [0.138471, 0.366555, 0.282705], [0.142367, 0.449289, 0.410302]],
    ("dr", 0.5): [[0.744857, 0.177306, 0.597326], [0.722782, 0.254938, 0.727859],
                  [0.301167, 0.445157, 0.345792], [0.279092, 0.522789, 0.476326],
                  [0.010473, 0.419282, 0.375415], [-0.011602, 0.496914, 0.505948]],
    ("ips", 0.0): [[1.456951, 0.135483, 0.900672], [1.025204, -0.002318, 0.681091],
                   [-0.04431, 0.141624, -0.144132], [-0.476057, 0.003822, -0.363713],
                   [-0.008556, 0.074017, 0.112198], [-0.440303, -0.063785, -0.107383]],
}
# the same with ``--clip_p 0.4`` (the probabilities 0.2 count as 0.4), power_t 0.5
VW_SCORES_CLIPPED = {
    "mtr": [[0.643492, 0.286264, 0.532277], [0.678578, 0.390444, 0.677944],
            [0.39142, 0.514439, 0.439068], [0.426507, 0.618619, 0.584735],
            [0.249194, 0.382775, 0.342608], [0.28428, 0.486955, 0.488275]],
    "dr": [[0.731498, 0.240222, 0.642495], [0.738477, 0.36436, 0.817143],
           [0.37875, 0.481456, 0.390744], [0.385729, 0.605594, 0.565392],
           [0.162178, 0.433129, 0.349033], [0.169156, 0.557267, 0.523681]],
    "ips": [[0.63645, 0.175701, 0.345494], [0.633468, 0.272129, 0.434998],
            [0.158055, 0.366833, 0.159958], [0.155073, 0.463261, 0.249462],
            [0.177471, 0.18352, 0.24567], [0.17449, 0.279948, 0.335173]],
}


def test_a_state_from_before_the_labels_range_learns_unclamped():
    """A state written before ``adf`` kept VW's labels' range (its ``totals`` had 5 entries)
    carries on as it learned, never clamped; a fresh policy starts from [0, 0], as VW."""
    policy = ActionFeaturePolicy(seed=0, cb_type="mtr")
    for i in range(30):
        policy.learn_one({"p": float(i % 3)}, f"a{i % 2}", float(i % 4 == 0), 0.5)
    assert policy._totals[5:7].tolist() == [0.0, 1.0]
    state = policy.to_state()
    state["model"]["totals"] = state["model"]["totals"][:5]
    old = ActionFeaturePolicy.from_state(state)
    assert old._totals[5] < -1e300 and old._totals[6] > 1e300
    old.learn_one({"p": 1.0}, "a0", 1.0, 0.5)
    assert old._totals[5] < -1e300 and old._totals[6] > 1e300


def _vw_events(n=30):
    """(u, v, played action, probability, reward): three users, values 1 / 2.5 / 4 (so that
    scales grow), rewards more likely where the action is the user's."""
    for i in range(n):
        u, a = i % 3, (7 * i + i // 3) % 3
        yield (u, (1.0, 2.5, 4.0)[(2 * i + i // 5) % 3], a, (0.2, 0.5, 0.8)[(5 * i + i // 2) % 3],
               float((13 * i) % 10 < 3 + 2 * (a == u)))


@pytest.mark.parametrize("cb_type, power_t, clip_p", [(*key, 0.0) for key in VW_SCORES] + [
    (cb_type, 0.5, 0.4) for cb_type in VW_SCORES_CLIPPED])
def test_scores_are_vws_after_the_same_events(cb_type, power_t, clip_p):
    """``adf`` given VW's lines learns what VW's ``gd`` learns (its weights are float32: 1e-6),
    with VW's ``--clip_p`` too (the importance weights and labels, not ``dr``'s regressor)."""
    features = {f"id{k}": {"a": {"f": float(k + 1)}} for k in range(3)}
    policy = ActionFeaturePolicy(seed=0, cb_type=cb_type, interactions=["sa"],
                                 learning_rate=0.5, power_t=power_t, clip_p=clip_p)
    for u, v, a, p, r in _vw_events():
        policy.learn_many([({"s": {"u": str(u), "v": v}}, f"id{a}", r, p, list(features),
                            features)])
    contexts = [{"s": {"u": str(u), "v": v}} for u in range(3) for v in (1.0, 4.0)]
    got = [policy.scores(x, list(features), features) for x in contexts]
    want = VW_SCORES_CLIPPED[cb_type] if clip_p else VW_SCORES[cb_type, power_t]
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_it_keeps_following_a_change():
    """Each user's favourite topic moves after 20 days: AdaGrad's steps shrink as 1 /
    sqrt(updates), so the weights still follow (the slowest of seeds 2-4 earned ~0.8 for
    6,000 events, then 0.96)."""
    policy = ActionFeaturePolicy(seed=2)
    read(policy, days=20)
    shifted = {t: TOPICS[(i + 1) % len(TOPICS)] for i, t in enumerate(TOPICS)}
    rng = random.Random(5)
    earned = []
    for t in range(2000, 10000):
        today = articles(t // 100)
        likes = rng.choice(TOPICS)
        x = {"likes": likes, "hour": 1.0}
        d = policy.decide(x, actions=list(today), action_features=today)
        reward = float(today[d.action]["topic"] == shifted[likes])
        policy.learn_one(x, d.action, reward, d.probability, today[d.action])
        earned.append(reward)
    assert np.mean(earned[-1000:]) > 0.9


@pytest.mark.parametrize("settings", [{}, PERSONALIZER])
def test_state_round_trip_and_the_serving_copy_decide_the_same(settings):
    policy = ActionFeaturePolicy(seed=6, bits=14, **settings)
    read(policy, days=5)
    policy.set_action_features("kept", {"topic": "music"})
    full = ActionFeaturePolicy.from_state(policy.to_state())
    serving = ActionFeaturePolicy.from_state(policy.to_state(statistics=False))
    assert len(policy.to_state()["model"]["index"]) == policy.feature_columns < 2 ** 14
    fresh = articles(50)
    for likes in TOPICS:
        x = {"likes": likes, "hour": 2.0}
        expected = policy.probabilities(x, actions=[*fresh, "kept"], action_features=fresh)
        assert full.probabilities(x, actions=[*fresh, "kept"], action_features=fresh) == expected
        assert serving.probabilities(x, [*fresh, "kept"], action_features=fresh) == expected
    # the full copy learns on as the original does
    x = {"likes": "travel"}
    for p in (policy, full):
        p.learn_one(x, "d0-4", 1.0, 0.2, articles(0)["d0-4"])
    assert np.array_equal(policy.scores(x, list(fresh), fresh), full.scores(x, list(fresh), fresh))


@pytest.mark.parametrize("params", [{}, PERSONALIZER])
def test_offered_rows_are_each_rows_probabilities_number_for_number(params):
    """What ``AutoPolicy`` evaluates ``adf`` with: every row over its own request's actions,
    with the features that request brought (or none: those each action last came with),
    scored in one call; the same numbers as ``probabilities`` row by row."""
    policy = ActionFeaturePolicy(seed=1, **params)
    read(policy, 6)
    rng = random.Random(2)
    xs, offers, given = [], [], []
    for i in range(40):
        today = articles(i % 8)  # days learned and days not yet seen
        offer = list(today)[: 2 + i % 4] + (["never-seen"] if i % 5 == 0 else [])
        xs.append({"likes": rng.choice(TOPICS), "hour": float(rng.randrange(24))}
                  if i % 7 else {})
        offers.append(tuple(offer) + ((offer[0],) if i % 9 == 0 else ()))  # (a repeat)
        given.append(None if i % 3 == 0 else {**today, "never-seen": {"topic": "sport"}})
    rows = policy.offered_rows(xs, offers, given)
    assert len(rows) == len(xs) and policy.offered_rows([], []) == []
    for x, offer, features, row in zip(xs, offers, given, rows):
        offer = tuple(dict.fromkeys(offer))
        assert dict(zip(offer, row.tolist())) == policy.probabilities(
            x, offer, action_features=features)
    with pytest.raises(ValueError, match="context"):
        policy.offered_rows(["likes=sport"], [("d0-0",)])


def test_hashes_do_not_depend_on_the_process():
    """Weights are found by CRC-32 keys, not Python's salted ``hash``: a state written by one
    process is read by another."""
    assert hashed({"topic": "sport", "price": 2.5}, CONTEXT_SEED) == (
        [277896215, 3287240857], [1.0, 2.5], [32, 32])


@pytest.mark.parametrize("features, error", [
    ({"price": math.nan}, ValueError), ({"price": 1e39}, ValueError),
    ({"tags": {1, 2}}, TypeError), ("topic=sport", TypeError),
])
def test_bad_action_features_are_refused_before_anything_changes(features, error):
    policy = ActionFeaturePolicy(seed=0)
    with pytest.raises(error):
        policy.learn_one({"x": 1.0}, "a", 1.0, 0.5, features)
    with pytest.raises(error):
        policy.decide({"x": 1.0}, actions=["a"], action_features={"a": features})
    assert policy.n_learned == 0 and policy.feature_columns == 0
    with pytest.raises(ValueError, match="dict of action id"):
        policy.learn_many([({"x": 1.0}, "a", 1.0, 0.5, None, [features])])


@pytest.mark.parametrize("params", [{"bits": 9}, {"bits": 27}, {"learning_rate": 0},
                                    {"gamma_scale": -1.0}, {"horizon": 0},
                                    {"forget_after": 0}])
def test_bad_parameters_are_refused(params):
    with pytest.raises(ValueError):
        ActionFeaturePolicy(**params)


def test_auto_adds_an_action_feature_candidate_and_serves_it():
    """The default kind: its candidates learn per action id; the first event with its
    actions' features brings an ``adf`` candidate, which serves at once, and still does after
    the trial (its estimate is the higher)."""
    from online.policies.auto import FEATURE_TRIAL, AutoPolicy

    auto = AutoPolicy(seed=3)
    rng = random.Random(4)
    batch, earned = [], []
    for t in range(FEATURE_TRIAL + 2000):
        today = articles(t // 100)
        x = {"likes": rng.choice(TOPICS)}
        d = auto.decide(x, actions=list(today), action_features=today)
        reward = float(today[d.action]["topic"] == x["likes"])
        batch.append((x, d.action, reward, d.probability, list(today), today))
        earned.append(reward)
        if len(batch) == 100:
            auto.learn_many(batch)
            batch = []
        if t == 99:
            assert [c["kind"] for c in auto.candidates] == ["trees", "linucb", "adf"]
            assert auto.serving == "adf"
    assert auto.serving == "adf"
    assert [(s["at"], s["from"], s["to"], s["reason"]) for s in auto.switches] == [
        (0, "trees", "adf", "action features")]
    assert first_of_each_day(earned, range(50, 60)) > 0.8
    clone = AutoPolicy.from_state(auto.to_state())
    assert clone.serving == "adf" and clone._feature_joined_at == 0
    # removed by an operator: it stays out
    clone.remove_candidate("adf", serving="trees")
    clone.learn_many([({"likes": "music"}, "d0-3", 1.0, 0.2, None, articles(0))])
    assert [c["kind"] for c in clone.candidates] == ["trees", "linucb"]


def test_after_its_trial_the_feature_candidate_keeps_an_app_whose_actions_are_young():
    """``bench/policies/articles.py``'s stream (30 new articles a day, 10 offered, clicks at
    0.05-0.27), seed 9, the usual rule held back by ``min_events``. Over the trial's second
    half the trees' off-policy estimate is the higher (0.136 against 0.130; on few seeds since
    ``adf`` learns as VW's ``gd``, the seed chosen for it): they learn per id what
    ``adf`` explored, which they could not do serving alone (served, they earn ~0.10 against
    ~0.16). Most of those events played actions with fewer than 50 events of their own, so
    ``adf`` keeps serving."""
    from bench.policies.articles import Stream
    from online.policies.auto import FEATURE_TRIAL, AutoPolicy

    auto = AutoPolicy(seed=9, min_events=10**6)
    stream = Stream(9, day=2000, pool=30, offered=10)
    assert 15 * 256 < FEATURE_TRIAL <= 16 * 256  # (the trial ends with the 16th batch)
    batch = []
    for t in range(FEATURE_TRIAL + 256):
        x, offered, rates = stream.request(t)
        features = {a: stream.features[a] for a in offered}
        d = auto.decide(x, actions=offered, action_features=features)
        batch.append((x, d.action, float(stream.rng.random() < rates[d.action]),
                      d.probability, offered, features))
        if len(batch) == 256:  # (the bench's batches)
            auto.learn_many(batch)
            batch = []
        if t == 16 * 256 - 257:  # (the trial's sums, before the trial reads them)
            w_trees, wr_trees = auto._trial_sums["trees"]
            w_adf, wr_adf = auto._trial_sums["adf"]
            assert wr_trees / w_trees > wr_adf / w_adf
            events, young = auto._trial_young
            assert young > events / 2
    assert auto._feature_trial_done and auto.serving == "adf"
    assert [(s["from"], s["to"]) for s in auto.switches] == [("trees", "adf")]


def test_no_per_id_candidate_replaces_the_feature_candidate_while_the_actions_are_young():
    """The same stream, seed 1, rewards drawn apart from the requests, the usual rule free to
    switch. By event 3,840 the trees' band sits above ``adf``'s (lower bound over ``adf``'s
    upper, estimate the higher; on 3 of seeds 0-25 since ``adf`` learns as VW's ``gd``):
    they learn per id what ``adf`` explored. Switched to them, an app earned 0.119 over
    40,000 events (0.161 with ``adf``). Most recent events played young actions, so no
    candidate that learns per id takes the app while ``adf`` serves."""
    from bench.policies.articles import Stream
    from online.policies.auto import FEATURE_TRIAL, AutoPolicy

    auto = AutoPolicy(seed=1)
    stream = Stream(1, day=2000, pool=30, offered=10)
    rng = np.random.default_rng(1)
    batch = []
    for t in range(FEATURE_TRIAL + 256):
        x, offered, rates = stream.request(t)
        features = {a: stream.features[a] for a in offered}
        d = auto.decide(x, actions=offered, action_features=features)
        batch.append((x, d.action, float(rng.random() < rates[d.action]), d.probability,
                      offered, features))
        if len(batch) == 256:
            auto.learn_many(batch)
            batch = []
    assert auto.serving == "adf"
    assert [(s["from"], s["to"]) for s in auto.switches] == [("trees", "adf")]
    assert auto.held.startswith("young actions: ") and "'adf'" in auto.held  # (said why)
    # the candidates learn the offers: the trees of the first day's articles, no longer
    # offered, are left out of the trees candidate's refits (its linear base still learns
    # them); its last refit came inside the batch that ended day 1, with the offers before it
    trees = auto.candidate("trees")
    gone = [trees._index[a] for a in trees.actions if a.startswith("d0-")]
    gone = [k for k in gone if trees._plays[k] >= 10]  # (events enough to boost)
    assert len(gone) > 20 and trees.n_refits > 10
    assert (np.diff(trees._ensemble.model_trees)[gone] == 0).all()
    figures = {e["name"]: e for e in auto.evaluations()}  # (what the usual rule would act on)
    trees, adf = figures["trees"], figures["adf"]
    assert trees["lower"] > adf["upper"] and trees["estimate"] > adf["estimate"]
    assert trees["events"] >= auto.min_events


def test_after_its_trial_the_former_candidate_takes_back_an_app_it_serves_better():
    """Four actions that stay, sent with features that say nothing; the best one is (a + b)
    mod 4 of the context's two categories, which the trees find and a linear model of the
    context per action cannot. ``adf`` serves when it joins; after the trial's 4,000 events
    the trees' estimate is the higher, and they serve again (the usual rule held back here by
    ``min_events``, as its bands are on a low-signal stream)."""
    from online.policies.auto import FEATURE_TRIAL, AutoPolicy

    auto = AutoPolicy(seed=5, min_events=10**6)
    rng = np.random.default_rng(6)
    features = {f"k{j}": {"shape": "same"} for j in range(4)}
    batch = []
    for _ in range(FEATURE_TRIAL + 200):
        a, b = (int(v) for v in rng.integers(4, size=2))
        x = {"a": f"a{a}", "b": f"b{b}"}
        d = auto.decide(x, actions=list(features), action_features=features)
        batch.append((x, d.action, float(d.action == f"k{(a + b) % 4}"), d.probability,
                      list(features), features))
        if len(batch) == 100:
            auto.learn_many(batch)
            batch = []
    assert auto.serving == "trees"
    first, second = auto.switches
    assert (first["from"], first["to"]) == ("trees", "adf")
    assert (second["at"], second["from"], second["to"]) == (FEATURE_TRIAL, "adf", "trees")
    estimates = {e["name"]: e["estimate"] for e in auto.evaluations()}
    assert estimates["trees"] > estimates["adf"]


def test_auto_without_action_features_keeps_its_candidates():
    from online.policies.auto import AutoPolicy

    auto = AutoPolicy(seed=3)
    rng = random.Random(4)
    for t in range(300):
        today = articles(t // 100)
        x = {"likes": rng.choice(TOPICS)}
        d = auto.decide(x, actions=list(today))
        auto.learn_one(x, d.action, float(today[d.action]["topic"] == x["likes"]),
                       d.probability)
    assert [c["kind"] for c in auto.candidates] == ["trees", "linucb"]


# -- VW's settings (what Personalizer's learning settings map onto) --------------------------------


@pytest.mark.parametrize("power_t", [0.0, 0.5, 1.0])
def test_power_t_is_vws(power_t):
    """Two events of the context ``p = 2`` for one action (four weights: the constant, p, the
    id, p x id), rewards 1 then 0, against VW's ``gd`` by hand: the first step moves the
    prediction 1 - e^(-2 eta) of the way (every p alike, as VW's first step); the second
    e^-h of it is left, h = 2 eta / (1 + y1^2)^p (AdaGrad's G shrinks it, not at p = 0)."""
    eta = 0.1
    policy = ActionFeaturePolicy(seed=0, learning_rate=eta, power_t=power_t)
    policy.learn_one({"p": 2.0}, "a", 1.0, 1.0)
    y1 = policy.scores({"p": 2.0}, ["a"])[0]
    assert y1 == pytest.approx(1.0 - math.exp(-2 * eta), rel=1e-12)
    policy.learn_one({"p": 2.0}, "a", 0.0, 1.0)
    h = 2 * eta / (1 + y1 ** 2) ** power_t
    assert policy.scores({"p": 2.0}, ["a"])[0] == pytest.approx(y1 * math.exp(-h), rel=1e-12)


@pytest.mark.parametrize("power_t, counts", [(0.0, 4.0), (0.5, 2.0)])
def test_mtr_weighs_an_event_by_one_over_its_probability(power_t, counts):
    """VW's ``--cb_type mtr``: an event played with probability 1/4 has importance 4, which
    enters the step, AdaGrad's G and the normalizer as in VW's ``gd``. The first step moves
    the prediction 1 - e^(-2 eta c) of the way, still short of the reward: c = 4 at p = 0,
    c = 4^(1 - p) = 2 at AdaGrad's p = 1/2 (G grew 4x too). ``dm`` counts the event once."""
    eta = 0.1
    for cb_type, times in (("mtr", counts), ("dm", 1.0)):
        policy = ActionFeaturePolicy(seed=0, learning_rate=eta, cb_type=cb_type,
                                     power_t=power_t)
        policy.learn_one({"p": 2.0}, "a", 1.0, 0.25)
        assert policy.scores({"p": 2.0}, ["a"])[0] == pytest.approx(
            1.0 - math.exp(-2 * eta * times), rel=1e-12)


def test_mtr_divides_by_the_mean_number_of_actions_offered():
    """VW's ``learn_MTR`` weighs by 1 / p x events / actions, the counts including this event:
    4 actions offered at p = 1/4 weigh 1 (a step of 1 - e^(-2 eta)); a second event's offer of
    2 at p = 1/2 weighs 2 x 2 / 6 = 2/3 (at power_t 0, on one context, each step leaves
    e^(-2 eta importance) of the error; the first prediction is read from a ``dm`` twin)."""
    eta = 0.1
    policy = ActionFeaturePolicy(seed=0, learning_rate=eta, cb_type="mtr", power_t=0.0)
    policy.learn_many([({"p": 2.0}, "a", 1.0, 0.25, ("a", "b", "c", "d"))])
    assert policy.scores({"p": 2.0}, ["a"])[0] == pytest.approx(1.0 - math.exp(-2 * eta),
                                                                rel=1e-12)
    assert policy._totals[3:5].tolist() == [1.0, 4.0]
    policy.learn_many([({"p": 2.0}, "a", 0.0, 0.5, ("a", "b"))])
    assert policy._totals[3:5].tolist() == [2.0, 6.0]
    twin = ActionFeaturePolicy(seed=0, learning_rate=eta, cb_type="dm", power_t=0.0)
    twin.learn_many([({"p": 2.0}, "a", 1.0, 0.25, ("a", "b", "c", "d"))])
    y1 = twin.scores({"p": 2.0}, ["a"])[0]
    # dm weighs 1; mtr's second event weighs 2/3: e^-(2 eta 2/3) of the prediction is left
    assert policy.scores({"p": 2.0}, ["a"])[0] == pytest.approx(
        y1 * math.exp(-2 * eta * 2 / 3), rel=1e-9)
    again = ActionFeaturePolicy.from_state(policy.to_state())
    assert again._totals.tolist() == policy._totals.tolist()


def test_interactions_multiply_only_the_namespaces_named():
    """With ``-q ut`` a user's features (``user.*``) meet an article's topic (``topic.*``),
    and the device (default namespace) meets none: two articles never played (their ids
    carry nothing) differ by the same score on either device; with every product (None) the
    device's products with the topic were learned too (sport on a mobile)."""
    gaps = {}
    for interactions in (["ut"], None):
        policy = ActionFeaturePolicy(seed=0, interactions=interactions, bits=24)  # (few
        rng = random.Random(0)  # collisions: a new id's slots are empty)
        for t in range(2000):
            x = {"user": {"likes": rng.choice(TOPICS)}, "device": rng.choice("mt")}
            topic = rng.choice(TOPICS)
            reward = (0.5 * (topic == x["user"]["likes"])  # sport reads well on mobiles
                      + 0.4 * (topic == "sport" and x["device"] == "m"))
            policy.learn_one(x, f"a{t % 20}", reward, 0.5, {"topic": {"name": topic}})
        new = {"n1": {"topic": {"name": "sport"}}, "n2": {"topic": {"name": "music"}}}
        gaps[str(interactions)] = [
            np.diff(policy.scores({"user": {"likes": "sport"}, "device": d}, ["n1", "n2"],
                                  new))[0] for d in "mt"]
    restricted, every = gaps["['ut']"], gaps["None"]
    assert restricted[0] == pytest.approx(restricted[1], abs=1e-12) and restricted[0] < -0.2
    assert every[0] - every[1] < -0.2


def test_epsilon_mixes_in_uniform_draws():
    policy = ActionFeaturePolicy(seed=0, epsilon=0.2)
    read(policy, days=5)
    today = articles(40)
    probabilities = policy.probabilities({"likes": "sport"}, list(today), action_features=today)
    assert min(probabilities.values()) >= 0.2 / len(today) - 1e-12
    assert max(probabilities.values()) > 0.5


@pytest.mark.parametrize("params, says", [
    ({"interactions": ["ut", "abc"]}, "two characters"), ({"interactions": "ut"}, "a list"),
    ({"cb_type": "ipsx"}, "cb_type"), ({"cb_type": "DR"}, "cb_type"), ({"power_t": 1.5}, "power_t"),
    ({"epsilon": -0.1}, "epsilon"),
    ({"ignore": "A"}, "ignore"), ({"ignore": [""]}, "ignore"), ({"ignore": [1]}, "ignore"),
    ({"l1": -1e-7}, "l1"), ({"l1": math.inf}, "l1"), ({"l1": True}, "l1"),
    ({"clip_p": 1.5}, "clip_p"), ({"clip_p": -0.1}, "clip_p"),
])
def test_bad_vw_settings_are_refused(params, says):
    with pytest.raises(ValueError, match=says):
        ActionFeaturePolicy(**params)


def test_ips_learns_every_offered_action_toward_vws_estimates():
    """VW's ``cb_adf`` with ``ips``: the played action is learned toward reward / probability,
    every other offered action toward 0."""
    policy = ActionFeaturePolicy(seed=0, cb_type="ips")
    x = {"likes": "sport"}
    policy.learn_many([(x, "a", 1.0, 0.5, ("a", "b"))] * 3000)
    a, b = policy.scores(x, ["a", "b"])
    assert a == pytest.approx(2.0, abs=0.05) and b == pytest.approx(0.0, abs=0.05)


def test_ips_learns_the_events_offer_or_else_the_inventory():
    x = {"likes": "sport"}
    by_offer = ActionFeaturePolicy(seed=0, cb_type="ips")
    by_inventory = ActionFeaturePolicy(seed=0, cb_type="ips")
    for policy in (by_offer, by_inventory):
        policy.add_action("c")
    by_offer.learn_many([(x, "a", 1.0, 0.5, ("a", "b"))])
    by_inventory.learn_many([(x, "a", 1.0, 0.5)])
    # c, in the inventory but not offered, is learned toward 0 only from the inventory
    assert by_offer.scores(x, ["c"])[0] == pytest.approx(by_offer.scores(x, ["zz"])[0])
    assert by_inventory.scores(x, ["c"])[0] != pytest.approx(by_inventory.scores(x, ["zz"])[0])
    # the mtr and dm ways learn the played action alone, whatever was offered (mtr weighs it
    # by the offer's size: an inventory of as many actions learns it the same)
    for cb_type in ("dm", "mtr"):
        one, other = (ActionFeaturePolicy(seed=0, cb_type=cb_type) for _ in range(2))
        other.add_action("z")
        one.learn_many([(x, "a", 1.0, 0.5, ("a", "b"))])
        other.learn_one(x, "a", 1.0, 0.5)
        assert np.array_equal(one._weights.w, other._weights.w)


def test_ips_recovers_the_best_article_from_a_uniform_log():
    policy = ActionFeaturePolicy(seed=0, cb_type="ips")
    policy.learn_many(uniform_log(4000, per_day=100, seed=1))
    fresh = articles(99)
    for likes in TOPICS:
        scores = policy.scores({"likes": likes}, list(fresh), fresh)
        assert fresh[list(fresh)[int(np.argmax(scores))]]["topic"] == likes


def test_ignore_drops_the_namespaces_named():
    """VW's ``--ignore A``: the features of namespaces starting with A count for nothing."""
    ignoring = ActionFeaturePolicy(seed=0, ignore=["Ab"])
    plain = ActionFeaturePolicy(seed=0)
    seeing = ActionFeaturePolicy(seed=0)
    rng = random.Random(2)
    for _ in range(300):
        likes = rng.choice(TOPICS)
        noise = {"Ad": {"slot": rng.choice("xyz")}, "by": {"v": rng.random()}}
        today = articles(0)
        action = rng.choice(list(today))
        reward = float(today[action]["topic"] == likes)
        extra = {a: {**f, "Ads": {"id": a}} for a, f in today.items()}
        ignoring.learn_many([({"likes": likes, **noise}, action, reward, 0.2, None, extra)])
        seeing.learn_many([({"likes": likes, **noise}, action, reward, 0.2, None, extra)])
        plain.learn_many([({"likes": likes}, action, reward, 0.2, None, today)])
    x = {"likes": "music", "Ad": {"slot": "x"}, "by": {"v": 0.3}}
    today = articles(0)
    assert np.array_equal(ignoring.scores(x, list(today), today),
                          plain.scores({"likes": "music"}, list(today), today))
    assert not np.array_equal(seeing.scores(x, list(today), today),
                              plain.scores({"likes": "music"}, list(today), today))


def test_l1_is_vws_truncated_gradient():
    """VW's ``--l1``: each update adds l1 x its step size to a gravity, and predictions read
    each weight shrunk toward 0 by it. From zero weights, one event with 4 features (bias,
    ``p``, the id, ``p`` x the id) at power_t 1/2: pred_per_update = sqrt(4) / (2 |error|),
    h = 2 eta pred_per_update, step = (1 - e^-h) / (2 pred_per_update)."""
    policy = ActionFeaturePolicy(seed=0, l1=0.01)
    plain = ActionFeaturePolicy(seed=0)
    for each in (policy, plain):
        each.learn_one({"p": 4.0}, "a", 1.0)
    h = 2 * 0.25 * 2 / 2
    gravity = 0.01 * (1 - math.exp(-h)) / 2
    assert policy._totals[2] == pytest.approx(gravity, rel=1e-12)
    assert plain.scores({"p": 4.0}, ["a"])[0] == pytest.approx(1 - math.exp(-h), rel=1e-12)
    assert np.array_equal(policy._weights.w, plain._weights.w)  # stored: not truncated
    shrunk = policy.scores({"p": 4.0}, ["a"])[0]
    assert shrunk < plain.scores({"p": 4.0}, ["a"])[0]
    # the next update's prediction (what its error is taken from) is the shrunk one too
    predicted = nag_step(_context_tokens({"p": 4.0}), policy._action_tokens("a", None), 1.0,
                         policy._weights, policy._totals,
                         Rule(policy.learning_rate, 0.5, 1.0, policy.l1), policy._cross,
                         policy._shift)
    assert predicted == pytest.approx(shrunk, rel=1e-12)


def test_l1_shrinks_the_model_and_its_copies_decide_the_same():
    x, today = {"likes": "music", "hour": 3.0}, articles(0)
    policies = {l1: ActionFeaturePolicy(seed=0, l1=l1) for l1 in (0.0, 1e-7, 1e-3, 10.0)}
    for policy in policies.values():
        read(policy, days=3)
    scores = {l1: p.scores(x, list(today), today) for l1, p in policies.items()}
    assert np.abs(scores[1e-7] - scores[0.0]).max() < 1e-3  # (the SDKs' sample's 1e-7)
    assert not np.array_equal(scores[1e-7], scores[0.0])
    assert not scores[10.0].any()  # every weight truncated to 0
    used = {l1: np.count_nonzero(p.to_state(statistics=False)["model"]["w"])
            for l1, p in policies.items()}
    assert used[1e-3] < used[0.0] and used[10.0] == 0
    policy = policies[1e-3]
    for state in (policy.to_state(), policy.to_state(statistics=False)):
        copy = ActionFeaturePolicy.from_state(state)
        assert np.array_equal(copy.scores(x, list(today), today), scores[1e-3])


def test_dr_learns_a_regressor_as_vws_get_cost_pred_does():
    """VW's ``dr``: the regressor learns the played line with importance 1 / p, first in its
    own weights (the same numbers as an ``mtr`` learner offered that action alone: importance
    1 / p), and the policy's lines are learned toward the doubly robust labels: for the played
    action q + (r - q) / p with q read before the regressor learned, 0 + 1 / 0.5 = 2 here."""
    x = {"likes": "sport"}
    policy = ActionFeaturePolicy(seed=0, cb_type="dr")
    twin = ActionFeaturePolicy(seed=0, cb_type="mtr")
    policy.learn_many([(x, "a", 1.0, 0.5, ("a", "b"))])
    twin.learn_many([(x, "a", 1.0, 0.5, ("a",))])
    assert np.array_equal(policy._regressor.w, twin._weights.w)
    # its own t (1 / p = 2) and N, as VW's gd keeps them per weight offset; the policy's t
    # counts its two lines (importance 1 each)
    assert policy._regressor_totals[0] == 2.0 and policy._totals[0] == 2.0
    assert np.array_equal(policy._regressor_totals[:2], twin._totals[:2])
    lines = ActionFeaturePolicy(seed=0, cb_type="dr")
    offer = lines._offer_tokens("a", lines._action_tokens("a", None), ("b", "a"), None)
    labels = [label for _, label in lines._dr_lines(lines._context(x), "a", offer, 1.0, 0.5)]
    assert labels == [0.0, 2.0]  # b came first: the regressor had learned nothing yet
    lines = ActionFeaturePolicy(seed=0, cb_type="dr")
    offer = lines._offer_tokens("a", lines._action_tokens("a", None), ("a", "b"), None)
    labels = [label for _, label in lines._dr_lines(lines._context(x), "a", offer, 1.0, 0.5)]
    q = twin.scores(x, ["b"])[0]  # b after a: what the regressor predicts once it learned
    assert labels[1] == pytest.approx(q, rel=1e-12) and q != 0.0
    assert labels[0] == 2.0


@pytest.mark.parametrize("p_a", [0.5, 0.9])
def test_dr_recovers_each_actions_reward_from_a_skewed_log(p_a):
    """Rewards 0.8 (a) and 0.2 (b), Bernoulli, logged with probability p_a for a: the policy's
    scores come near both, the one rarely played too."""
    rng = random.Random(4)
    x = {"likes": "sport"}
    events = []
    for _ in range(4000):
        a = "a" if rng.random() < p_a else "b"
        reward = float(rng.random() < (0.8 if a == "a" else 0.2))
        events.append((x, a, reward, p_a if a == "a" else 1 - p_a, ("a", "b")))
    policy = ActionFeaturePolicy(seed=0, cb_type="dr", learning_rate=0.05)  # (less noise:
    policy.learn_many(events)  # at 0.25 the last events move every cb_type's scores by ~0.1)
    a, b = policy.scores(x, ["a", "b"])
    assert a == pytest.approx(0.8, abs=0.06) and b == pytest.approx(0.2, abs=0.06)


def test_dr_state_round_trips_with_its_regressor():
    x = {"likes": "sport"}
    policy = ActionFeaturePolicy(seed=0, cb_type="dr")
    policy.learn_many([(x, "a", 1.0, 0.5, ("a", "b")), (x, "b", 0.0, 0.5, ("a", "b"))])
    again = ActionFeaturePolicy.from_state(policy.to_state())
    for learner in (policy, again):
        learner.learn_many([(x, "b", 1.0, 0.25, ("a", "b"))])
    assert np.array_equal(again._regressor.w, policy._regressor.w)
    assert np.array_equal(again._regressor_totals, policy._regressor_totals)
    assert np.array_equal(again._weights.w, policy._weights.w)
    serving = ActionFeaturePolicy.from_state(policy.to_state(statistics=False))
    assert np.array_equal(serving.scores(x, ["a", "b"]), policy.scores(x, ["a", "b"]))
