"""RuDi end to end on a synthetic teacher, GS-NLN gradients, fidelity, state round trip."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from online.rules.gs_nln import GSNLN, Binarizer, augment, render
from online.rules.metrics import fidelity
from online.rules.rudi import RuDi

# the operators of the recovery test; test_mcts_sg_finds_the_teacher_statistics says why
OPS = ["Select", "FilterBy", "RetainBy", "GroupBy", "Sum", "Mean", "Max", "Count"]


def synthetic(n=600, seed=4):
    """Teacher: Sum(amount where type=a) > 10 AND Count(channel=app) < 3."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 8, n)
    m = lengths.sum()
    events = {
        "user": np.repeat(np.arange(n), lengths),
        "type": rng.choice(["a", "c"], m),
        "channel": rng.choice(["web", "app"], m, p=[0.65, 0.35]),
        "amount": np.ceil(rng.exponential(4.0, m)),
    }
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    sum_a = np.add.reduceat(events["amount"] * (events["type"] == "a"), starts)
    count_app = np.add.reduceat((events["channel"] == "app").astype(float), starts)
    teacher = (sum_a > 10) & (count_app < 3)
    scores = teacher + 0.05 * rng.standard_normal(n)
    return events, scores, sum_a, count_app, teacher


@pytest.fixture(scope="module")
def fitted():
    events, scores, sum_a, count_app, teacher = synthetic()
    model = RuDi(K=3, D=3, R=2, H=4, n_simulations=400, epochs=100, operators=OPS,
                 random_state=4)
    model.fit(events, "user", scores, labels=teacher)
    return model, events, scores, sum_a, count_app, teacher


def test_mcts_sg_finds_the_teacher_statistics(fitted):
    """MCTS-SG finds Sum(amount where type=a) and the app count, on a restricted operator set.

    Why restricted (measured on ``synthetic()``, D = 3, B = 128; figures and scripts in
    bench/rudi/README.md): MCTS-SG fixes the first operator (the Select) by eq. 6, the *mean*
    reward of the random completions (eq. 3) below each child of the root, and UCT (eq. 2,
    c = 1/sqrt(2)) also steers by that mean. With the full default operator set,
    ``Select amount`` is followed by 15 aggregations and ~10 row operators, and only the few
    completions through ``RetainBy type=a`` (or its twin ``FilterBy type=c``) score well, so
    its mean reward stays low (0.23 after 4,000 simulations, 450 visits), while almost every
    completion of ``Select type`` is a fair surrogate (``Sum(Select type)``: the number of
    type-a events; ``First(Select type | SortBy amount desc)``: is the largest payment of type
    a?), mean 0.31 (3,228 visits). With 12,000 simulations ``Select amount`` has 496 visits:
    UCT came back to it 46 times in 8,000 more simulations. On all entities the wanted ``Sum(Select
    amount | RetainBy type=a)`` has |corr| 0.535 with the teacher, the surrogates 0.37-0.41, and
    ``Max(Select amount | RetainBy type=a)`` 0.529: within the noise of a 128-entity batch, so even
    below the right Select, Sum vs Max is a coin flip. With the full set, 0 of 6 seeds found the
    exact sum (K = 3 with 400, 1,500 or 4,000 simulations per tree; K = 6 with 1,000; also 0 of 6
    with gamma-distributed amounts), while all found ``Sum(Select channel)`` (the app count). That
    is the paper's algorithm (means, not maxima, in eqs. 2 and 6) on a deceptive search space, not a
    defect a faithful fix removes; so this test keeps the operators that build the teacher's
    statistics plus distractors (Mean, Max, GroupBy, FilterBy, every Select).
    """
    model, events, _, sum_a, count_app, _ = fitted
    X = model.transform(events)
    assert any(np.array_equal(X[:, j], sum_a) for j in range(X.shape[1]))
    assert any(np.array_equal(X[:, j], count_app) for j in range(X.shape[1]))
    # statistics are reported with their correlation to the teacher
    assert all(0.0 <= s["correlation"] <= 1.0 for s in model.statistics_)
    assert model.multiple_correlation_ >= max(s["correlation"] for s in model.statistics_)


def test_gs_nln_recovers_an_equivalent_rule(fitted):
    model, events, _, _, _, teacher = fitted
    # the weighted rules are the teacher's rule: one threshold on the student's score splits
    # the entities exactly as the teacher does
    pred = model.predict(events)
    assert pred[teacher].min() > pred[~teacher].max()
    assert model.auc_ == 1.0
    assert all(r["n_literals"] <= 4 for r in model.rules_)
    used = " ".join(r["rule"] for r in model.rules_ if r["weight"] != 0)
    assert "Sum(Select channel=app)" in used and "Sum(Select amount | " in used
    assert all(0.0 < r["support"] < 1.0 for r in model.rules_)
    assert "weight" in model.rules_text()


def test_gs_nln_finds_the_single_rule():
    """On the teacher's two statistics, one rule (or its negation) is the teacher's rule."""
    _, scores, sum_a, count_app, teacher = synthetic()
    X = np.column_stack([sum_a, count_app])
    binz = Binarizer().fit(X)
    Z = binz.transform(X)
    words = binz.describe(["Sum(amount where type=a)", "Count(channel=app)"])
    wanted = {
        "Sum(amount where type=a) > 10 AND Count(channel=app) <= 2",
        "Count(channel=app) <= 2 AND Sum(amount where type=a) > 10",
        "Sum(amount where type=a) <= 10 OR Count(channel=app) > 2",
        "Count(channel=app) > 2 OR Sum(amount where type=a) <= 10",
    }
    found = 0
    for seed in range(3):  # the ranking loss may also split the rule over two weighted rules
        net = GSNLN(R=2, H=4, L=2, epochs=100, random_state=seed).fit(Z, scores)
        acts = net.rule_activations(Z) == 1
        exprs = net.expressions(len(binz.literals_))
        for r in range(2):
            if np.array_equal(acts[:, r], teacher) or np.array_equal(~acts[:, r], teacher):
                assert render(exprs[r], words) in wanted
                found += 1
                break
    assert found >= 2


def test_predict_new_events_and_score(fitted):
    model, *_ = fitted
    events, scores, _, _, teacher = synthetic(n=300, seed=11)
    pred = model.predict(events)
    assert pred.shape == (300,)
    res = model.score(events, scores, labels=teacher)
    assert res["auc"] > 0.97
    frame = pd.DataFrame(events)
    np.testing.assert_allclose(model.predict(frame), pred)
    # scores as a mapping entity -> score
    assert model.score(events, dict(enumerate(scores)))["fidelity"] == res["fidelity"]


def test_state_round_trip(fitted):
    model, events, *_ = fitted
    state = model.to_state()
    assert state["format"] == "grove.rudi" and state["version"] == 1

    def check(leaf):
        if isinstance(leaf, dict):
            for v in leaf.values():
                check(v)
        elif isinstance(leaf, list):
            for v in leaf:
                check(v)
        elif not isinstance(leaf, np.ndarray):
            json.dumps(leaf)

    check(state)
    again = RuDi.from_state(state)
    np.testing.assert_array_equal(again.predict(events), model.predict(events))
    assert again.rules_ == model.rules_


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    Z = rng.integers(0, 2, (16, 3)).astype(float)
    y = rng.standard_normal(16)
    net = GSNLN(R=4, H=3, L=2)
    Z0 = augment(Z)
    net._init(Z0.shape[1], rng)
    noise, tau = net.sample_noise(rng), 0.7
    _, grads = net.loss_and_grads(Z0, y, tau, noise)
    for p, g in zip(net._params(), grads):
        flat = p.reshape(-1)
        for k in rng.choice(flat.size, min(flat.size, 12), replace=False):
            old = flat[k]
            flat[k] = old + 1e-6
            up, _ = net.loss_and_grads(Z0, y, tau, noise)
            flat[k] = old - 1e-6
            down, _ = net.loss_and_grads(Z0, y, tau, noise)
            flat[k] = old
            assert abs((up - down) / 2e-6 - g.reshape(-1)[k]) < 1e-7


def test_binarizer_eq10():
    x = np.arange(100.0)
    b = Binarizer().fit(np.column_stack([x, x % 2]))
    thresholds = [t for j, t in b.literals_ if j == 0]
    np.testing.assert_allclose(
        thresholds, np.percentile(x, [0, 10, 20, 30, 40, 50, 60, 70, 80, 90])
    )
    assert (1, None) in b.literals_  # the binary column is kept as it is
    assert b.transform(np.array([[50.0, 1.0]])).tolist()[0][:7] == [1] * 6 + [0]  # 50 > 49.5


def test_fidelity_matches_brute_force():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 6, 150).astype(float)
    s = rng.integers(0, 4, 150).astype(float)
    a, b = y[:, None] > y[None, :], s[:, None] > s[None, :]
    off = ~np.eye(150, dtype=bool)
    assert fidelity(y, s) == pytest.approx(((a == b) & off).sum() / (150 * 149))


def test_progress_is_reported_in_order():
    events, scores, *_ = synthetic(n=150, seed=2)
    seen = []
    RuDi(K=2, D=2, R=2, H=2, n_simulations=20, epochs=3, random_state=0).fit(
        events, "user", scores, progress=lambda f, msg: seen.append((f, msg)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and 0 < fractions[0] and fractions[-1] == 1.0
    assert all(isinstance(m, str) for _, m in seen)


def test_bad_inputs_raise():
    events, scores, *_ = synthetic(n=50, seed=3)
    with pytest.raises(ValueError):
        RuDi(K=1, D=2, R=2, n_simulations=5, epochs=1).fit(events, "user", scores[:10])
    with pytest.raises(ValueError):
        RuDi(K=1, D=2, R=3, n_simulations=5, epochs=1).fit(events, "user", scores)


def test_sequences_of_length_one():
    """The live-app mode: each logged decision is an entity with one event (its context)."""
    rng = np.random.default_rng(5)
    n = 400
    contexts = {
        "decision": np.arange(n),
        "age": rng.integers(18, 70, n).astype(float),
        "device": rng.choice(["ios", "android", "web"], n),
    }
    prob = 0.8 * ((contexts["age"] > 40) & (contexts["device"] == "ios")) + 0.1
    model = RuDi(K=2, D=2, R=2, H=2, n_simulations=60, epochs=60, random_state=0)
    model.fit(contexts, "decision", prob)
    assert model.fidelity_ > 0.85  # thresholds are deciles (eq. 10): age > 40 becomes > 42
    assert {s["name"].split("(")[1].split(")")[0] for s in model.statistics_} >= {
        "Select age", "Select device"}


def test_adjusted_reward_removes_the_dimension_bias():
    """Eq. 5/9 on a batch of B gives a p-dimensional statistic about sqrt(p / B) with no signal;
    the (non-paper, opt-in) adjusted reward does not."""
    from online.rules.events import EventTable, infer_schema
    from online.rules.mcts_sg import MCTSSG
    from online.rules.operators import Grammar, build_operators

    rng = np.random.default_rng(0)
    n = 400
    lengths = rng.integers(2, 9, n)
    ev = {"user": np.repeat(np.arange(n), lengths),
          "page": rng.choice(list("abcdefghij"), lengths.sum())}
    schema = infer_schema(ev, "user")
    table = EventTable.from_events(ev, "user", schema)
    g = Grammar(build_operators(schema), 2)
    stat = (g.index["Select page"], g.index["Sum"])
    noise = rng.standard_normal(n)  # a teacher unrelated to the events
    means = {}
    for adjusted in (False, True):
        sg = MCTSSG(B=128, adjusted=adjusted, random_state=1)
        sg._rng, sg.table_, sg.grammar_ = np.random.default_rng(1), table, g
        sg.n_rewards_ = sg.reward_entities_ = sg.reward_events_ = 0  # as fit() starts
        means[adjusted] = np.mean([sg.reward(stat, noise) for _ in range(30)])
    assert 0.2 < means[False] < 0.36  # sqrt(10 / 127) = 0.28
    assert means[True] < 0.12


@pytest.mark.parametrize("n", [300, 3000])
def test_search_cost_does_not_depend_on_the_number_of_entities(n):
    """Sec. 3.2.5: the tree search evaluates K x D x B x simulations data points at most,
    whatever N: every simulation's reward reads exactly B entities."""
    from online.rules.events import EventTable, infer_schema
    from online.rules.mcts_sg import MCTSSG
    from online.rules.operators import Grammar, build_operators

    events, scores, *_ = synthetic(n=n, seed=1)
    schema = infer_schema(events, "user")
    table = EventTable.from_events(events, "user", schema)
    K, D, B, sims = 2, 3, 64, 30
    grammar = Grammar(build_operators(schema), D)
    sg = MCTSSG(K, D, B, sims, random_state=0).fit(table, scores, grammar)
    trees = sum(len(s) for s in sg.statistics_)  # Algorithm 1: one tree per operator
    assert sg.n_rewards_ == sims * trees <= K * D * sims
    assert sg.reward_entities_ == B * sg.n_rewards_
    assert 3 * sg.reward_entities_ <= sg.reward_events_ <= 7 * sg.reward_entities_  # 3-7 events
