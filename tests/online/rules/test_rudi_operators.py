"""RuDi operators (sec. 3.2.1) against a per-entity reference, and the validity grammar."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from online.rules.events import EventTable, infer_schema
from online.rules.mcts_sg import MCTSSG
from online.rules.operators import Aggregation, Grammar, build_operators

# entity 0: mixed; entity 1: a single event; entity 2: 7 events (Top5 cuts);
# entity 3: no 'a' events (RetainBy type=a leaves an empty group)
EVENTS = {
    "user": [0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3],
    "amount": [3.0, -1.0, 5.0, 2.0, 7.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, -7.0, 2.5, 0.5],
    "type": ["a", "b", "a", "a", "b", "a", "b", "b", "b", "a", "b", "b", "b", "b"],
    "chan": ["web", "app", "web", "app", "web", "app", "app", "web", "web", "app", "web",
             "web", "web", "app"],
}


@pytest.fixture(scope="module")
def setup():
    schema = infer_schema(EVENTS, "user")
    table = EventTable.from_events(EVENTS, "user", schema)
    return schema, table


def _agg(name, vals):
    """Reference aggregation of a list of value vectors (empty -> 0)."""
    if name == "Count":
        return np.array([float(len(vals))])
    if not vals:
        return None
    a = np.array(vals, dtype=float)
    if name.startswith("Percentile"):
        return np.percentile(a, int(name[len("Percentile"):]), axis=0)
    return {
        "Mean": lambda: a.mean(0), "Max": lambda: a.max(0), "Min": lambda: a.min(0),
        "Sum": lambda: a.sum(0), "Std": lambda: a.std(0), "Ptp": lambda: np.ptp(a, 0),
        "First": lambda: a[0],
    }[name]()


def reference(names, events, schema, p):
    """Evaluates a statistic (operator names, T_1 first) on one entity's list of events."""
    rows = [dict(e, _v=None) for e in events]
    groups = None
    for name in names:
        head, _, arg = name.partition(" ")
        if head == "Select":
            if arg in schema.categorical:
                cats = schema.top(arg)
                for r in rows:
                    r["_v"] = np.array([float(r[arg] == c) for c in cats])
            else:
                for r in rows:
                    r["_v"] = np.array([float(r[arg])])
        elif head == "FilterBy":
            col, val = arg.split("=")
            rows = [r for r in rows if r[col] != val]
        elif head == "RetainBy":
            col, val = arg.split("=")
            rows = [r for r in rows if r[col] == val]
        elif head == "SortBy":
            col, direction = arg.split(" ")
            rows = sorted(rows, key=lambda r: r[col], reverse=False) if direction == "asc" \
                else sorted(rows, key=lambda r: -r[col])
        elif name == "Top5":
            rows = rows[:5]
        elif name == "Abs":
            for r in rows:
                r["_v"] = np.abs(r["_v"])
        elif head == "GroupBy":
            vocab = schema.vocab[arg]
            keys = sorted({r[arg] for r in rows}, key=vocab.index)
            groups = [[r for r in rows if r[arg] == k] for k in keys]
        else:  # aggregation
            if groups is not None:
                out = []
                for g in groups:
                    v = _agg(name, [r["_v"] for r in g])
                    out.append(v)
                rows = [{"_v": v} for v in out]
                groups = None
            else:
                v = _agg(name, [r["_v"] for r in rows])
                return np.zeros(p) if v is None else v
    raise AssertionError("not a terminal statistic")


def all_statistics(grammar, seq=()):
    if grammar.is_terminal(seq):
        yield seq
        return
    for i in grammar.next_ops(seq):
        yield from all_statistics(grammar, seq + (i,))


def test_every_operator_matches_the_reference(setup):
    schema, table = setup
    grammar = Grammar(build_operators(schema), max_depth=4)
    stats = list(all_statistics(grammar))
    used = {grammar.operators[i].name for s in stats for i in s}
    assert used == {op.name for op in grammar.operators}  # every operator is exercised
    rng = np.random.default_rng(0)
    sample = [stats[i] for i in rng.choice(len(stats), 1500, replace=False)]
    sample += [s for s in stats if len(s) <= 3]
    per_entity = [[{k: EVENTS[k][i] for k in EVENTS} for i in range(len(EVENTS["user"]))
                   if EVENTS["user"][i] == u] for u in range(4)]
    for s in sample:
        names = [grammar.operators[i].name for i in s]
        got = grammar.evaluate(s, table)
        for u in range(4):
            want = reference(names, per_entity[u], schema, got.shape[1])
            np.testing.assert_allclose(got[u], want, atol=1e-9, err_msg=f"{names} user {u}")


def test_hand_computed_values(setup):
    schema, table = setup
    g = Grammar(build_operators(schema), max_depth=4)

    def ev(*names):
        return g.evaluate(tuple(g.index[n] for n in names), table)

    np.testing.assert_allclose(ev("Select amount", "RetainBy type=a", "Sum")[:, 0],
                               [10.0, 0.0, 6.0, 0.0])  # empty group -> 0
    np.testing.assert_allclose(ev("Select amount", "RetainBy type=a", "Mean")[:, 0],
                               [10 / 3, 0.0, 3.0, 0.0])
    np.testing.assert_allclose(ev("Select amount", "Std")[1, 0], 0.0)  # single event
    np.testing.assert_allclose(ev("Select amount", "Top5", "Sum")[:, 0], [9, 7, 15, 3])
    np.testing.assert_allclose(ev("Select amount", "SortBy amount desc", "First")[:, 0],
                               [5, 7, 6, 2.5])
    np.testing.assert_allclose(ev("Select amount", "Abs", "Min")[:, 0], [1, 7, 1, 0.5])
    np.testing.assert_allclose(ev("Select amount", "Percentile50")[:, 0], [2.5, 7, 3, 1.5])
    # largest per-type total amount
    np.testing.assert_allclose(ev("Select amount", "GroupBy type", "Sum", "Max")[:, 0],
                               [10, 7, 8, 3])
    # Count ignores the Select; number of distinct types
    np.testing.assert_allclose(ev("Select type", "RetainBy chan=app", "Count")[:, 0],
                               [2, 0, 3, 1])
    np.testing.assert_allclose(ev("Select amount", "GroupBy type", "Count", "Count")[:, 0],
                               [2, 1, 2, 1])
    onehot = ev("Select type", "Sum")  # p-dimensional: one column per category
    assert onehot.shape == (4, 2)
    assert g.dimension_labels(tuple(g.index[n] for n in ("Select type", "Sum"))) == [
        f"Sum(Select type={v})" for v in schema.top("type")]


def test_dataframe_and_dict_inputs_agree(setup):
    schema, table = setup
    frame = pd.DataFrame(EVENTS).sample(frac=1.0, random_state=1)  # shuffled rows
    frame = frame.sort_values("user", kind="stable")
    t2 = EventTable.from_events(frame, "user", infer_schema(frame, "user"))
    g = Grammar(build_operators(schema), 4)
    s = tuple(g.index[n] for n in ("Select amount", "RetainBy type=a", "Sum"))
    np.testing.assert_allclose(g.evaluate(s, t2), g.evaluate(s, table))


def _paper_valid(names, schema, D):
    """The validity rules of sec. 3.2.1, checked independently of the grammar's code."""
    if not 2 <= len(names) <= D or not names[0].startswith("Select "):
        return False
    if any(n.startswith("Select ") for n in names[1:]):
        return False
    aggs = [i for i, n in enumerate(names) if n in AGG_NAMES]
    groups = [i for i, n in enumerate(names) if n.startswith("GroupBy ")]
    if len(groups) > 1:
        return False
    if groups:  # GroupBy followed by an aggregation, and a second one to reduce the groups
        gi = groups[0]
        return aggs == [gi + 1, gi + 2] and gi + 2 == len(names) - 1
    return aggs == [len(names) - 1]  # exactly one aggregation, last (Mean o Mean invalid)


AGG_NAMES = {"Mean", "Max", "Min", "Sum", "Std", "Ptp", "Count", "First"} | {
    f"Percentile{k}" for k in (5, 10, 25, 50, 75, 90, 95)}


@pytest.mark.parametrize("D", [2, 3, 4, 5])
def test_random_completions_are_always_valid(setup, D):
    schema, table = setup
    grammar = Grammar(build_operators(schema), max_depth=D)
    sg = MCTSSG(D=D, random_state=D)
    sg._rng = np.random.default_rng(D)
    sg.grammar_, sg.table_, sg.invalid_, sg._complete_memo = grammar, table, set(), {}
    # invalidate a few statistics: they must never come back
    banned = [("Select amount", "Sum"), ("Select type", "Mean")]
    for names in banned:
        sg.invalid_.add(grammar.canonical_key(tuple(grammar.index[n] for n in names)))
    seen = set()
    for _ in range(3000):
        s = sg.random_completion(())
        names = [grammar.operators[i].name for i in s]
        assert _paper_valid(names, schema, D), names
        assert grammar.is_valid(s)
        assert grammar.canonical_key(s) not in sg.invalid_
        out = grammar.evaluate(s, table)
        assert out.shape[0] == 4 and np.isfinite(out).all()
        seen.add(s)
    assert len(seen) > 30  # D=2 has 3 selects x 15 aggregations, minus 2 banned


def test_mean_of_mean_is_invalid(setup):
    schema, _ = setup
    g = Grammar(build_operators(schema), 4)
    assert not g.is_valid(tuple(g.index[n] for n in ("Select amount", "Mean", "Mean")))
    assert not g.is_valid(tuple(g.index[n] for n in ("Select amount", "GroupBy type", "Abs")))
    assert not g.is_valid(tuple(g.index[n] for n in ("Select amount", "Abs")))  # not terminal
    assert g.is_valid(tuple(g.index[n] for n in ("Select amount", "GroupBy type", "Mean", "Max")))


def test_user_registered_operator(setup):
    schema, table = setup
    second = Aggregation("SecondLargest", lambda v: np.sort(v)[-2] if len(v) > 1 else 0.0,
                         per_segment=True)
    g = Grammar(build_operators(schema, extra=[second]), 3)
    s = tuple(g.index[n] for n in ("Select amount", "SecondLargest"))
    assert g.is_valid(s)
    np.testing.assert_allclose(g.evaluate(s, table)[:, 0], [3, 0, 5, 0.5])
    assert g.dimension_labels(s) == ["SecondLargest(Select amount)"]


def test_value_transforms_under_a_count_are_the_same_statistic(setup):
    """Count ignores the values: Count(Select x | Abs) is Count(events), so choosing one of them
    must invalidate the other (V <- V \\ {S}); a value transform changes nothing elsewhere."""
    schema, table = setup
    g = Grammar(build_operators(schema), 4)
    with_abs = tuple(g.index[n] for n in ("Select amount", "RetainBy type=a", "Abs", "Count"))
    plain = tuple(g.index[n] for n in ("Select type", "RetainBy type=a", "Count"))
    assert g.is_valid(with_abs) and g.is_valid(plain)
    np.testing.assert_array_equal(g.evaluate(with_abs, table), g.evaluate(plain, table))
    assert g.canonical_key(with_abs) == g.canonical_key(plain)
    assert g.label(with_abs) == g.label(plain) == "Count(RetainBy type=a)"
    summed = tuple(g.index[n] for n in ("Select amount", "Abs", "Sum"))
    assert g.canonical_key(summed) != g.canonical_key(summed[:1] + summed[2:])
    sg = MCTSSG(D=4, random_state=0)
    sg._rng, sg.grammar_, sg.table_ = np.random.default_rng(0), g, table
    sg.invalid_, sg._complete_memo = {g.canonical_key(plain)}, {}
    assert not sg._completable(with_abs)
