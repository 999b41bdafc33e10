"""The operators of sec. 3.2.1 and the grammar of valid statistics.

A statistic is a composition S = T_d o ... o T_1 (2 <= d <= D) of basic operators:
``Select_F`` first, then row operators (``FilterBy_{F=f}``, ``RetainBy_{F=f}``,
``SortBy_{F,asc|desc}``, ``Top5``, ``Abs``), optionally one ``GroupBy_F`` which must be followed
by an aggregation, and aggregations (eq. 1: Mean, Max, Min, Sum, Std, Ptp, Count, First,
Percentile_k for k in 5, 10, 25, 50, 75, 90, 95). A categorical Select gives one-hot values, so
the statistic is p-dimensional; a numerical one gives a scalar.

Every operator works on all entities of a batch at once: a ``View`` holds the event rows (sorted
by entity), each row's segment (entity) id and the selected values ``(n, p)``; aggregations
reduce segments with ``ufunc.reduceat``.

Users register their own operators by passing instances of ``Aggregation``, ``Transform`` or
``RowFilter`` (or any ``Operator`` subclass) to ``build_operators(..., extra=[...])``.

Choices where the paper is silent or ambiguous
----------------------------------------------
- The grammar is a small state machine: ``start --Select--> seq``; in ``seq``: row operators,
  ``GroupBy`` (-> ``grouped``), or an aggregation (-> terminal); in ``grouped``: only an
  aggregation (-> ``groups``, one value per group); in ``groups``: an aggregation (-> terminal).
  So a GroupBy statistic reads ``Agg2 o Agg1 o GroupBy_G o ... o Select_F`` (e.g. the largest
  per-page mean) and needs at least 4 operators; D=4 allows it right after the Select.
- An aggregation ends the statistic (``Mean o Mean o Select`` is invalid, as the paper says);
  ``Abs`` only applies to numerical sequences, before aggregation.
- No operator repeats within a statistic (Abs o Abs, Top5 o Top5 and RetainBy twice are
  no-ops); one RetainBy per column (two different values would leave nothing); no FilterBy on a
  column already retained; at most one SortBy, and it must be followed directly by an operator
  that reads the order (``Top5`` or ``First``): otherwise it changes nothing. ``GroupBy_G`` is
  not allowed on the selected column nor on a retained column (one group).
- ``Count`` ignores the selected values: it always returns one number (the length; in
  ``groups`` the number of groups), and statistics that differ only by the Select, or by value
  transforms (``Abs``, your own ``Transform``), under a Count are the same statistic
  (``canonical_key``: invalidating one invalidates all; labels omit them). Groups are ordered
  by category code.
- Aggregations of an empty sequence give 0 (Count and Sum naturally; Mean, Max, Min, Std, Ptp,
  First and the percentiles by choice). Std is the population std (ddof=0). Percentiles
  interpolate linearly (numpy's default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from online.rules.events import EventTable, Schema

PERCENTILES = (5, 10, 25, 50, 75, 90, 95)  # eq. 1


@dataclass
class View:
    """Intermediate value of a statistic on a batch of ``n_seg`` entities.

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> view = View.of(table)
    >>> view.n_seg, view.seg.tolist(), view.column("amount").tolist()
    (2, [0, 0, 0, 1], [1.0, -2.0, 4.0, 5.0])
    """

    table: EventTable
    n_seg: int
    seg: np.ndarray  # (n,) non-decreasing segment id of every element
    rows: np.ndarray | None  # event row of every element; None once aggregated
    values: np.ndarray | None = None  # (n, p) after Select
    group: np.ndarray | None = None  # pending GroupBy codes

    @classmethod
    def of(cls, table: EventTable, entity_index=None) -> View:
        """All events of the given entities (all by default), before the Select."""
        if entity_index is None:
            entity_index = np.arange(table.n_entities)
        rows, seg = table.batch_rows(entity_index)
        return cls(table, len(entity_index), seg, rows)

    def column(self, name: str) -> np.ndarray:
        """Another column of the events, aligned with the current rows."""
        return self.table.columns[name][self.rows]

    def keep(self, mask: np.ndarray) -> View:
        values = None if self.values is None else self.values[mask]
        return replace(self, seg=self.seg[mask], rows=self.rows[mask], values=values)

    def take(self, order: np.ndarray) -> View:
        values = None if self.values is None else self.values[order]
        return replace(self, seg=self.seg[order], rows=self.rows[order], values=values)


def segment_starts(seg: np.ndarray, n_seg: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts and start offsets of each segment in a seg array sorted by segment."""
    counts = np.bincount(seg, minlength=n_seg)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return counts, starts


def _reduceat(ufunc, values, seg, n_seg, empty=0.0):
    counts, starts = segment_starts(seg, n_seg)
    out = np.full((n_seg, values.shape[1]), empty, dtype=np.float64)
    nonempty = counts > 0
    if nonempty.any():
        out[nonempty] = ufunc.reduceat(values, starts[nonempty], axis=0)
    return out


def agg_sum(values, seg, n_seg):
    return _reduceat(np.add, values, seg, n_seg)


def agg_count(values, seg, n_seg):
    return np.bincount(seg, minlength=n_seg).astype(np.float64)[:, None]


def agg_mean(values, seg, n_seg):
    counts = np.bincount(seg, minlength=n_seg)[:, None]
    return agg_sum(values, seg, n_seg) / np.maximum(counts, 1)


def agg_max(values, seg, n_seg):
    return _reduceat(np.maximum, values, seg, n_seg)


def agg_min(values, seg, n_seg):
    return _reduceat(np.minimum, values, seg, n_seg)


def agg_ptp(values, seg, n_seg):
    return agg_max(values, seg, n_seg) - agg_min(values, seg, n_seg)


def agg_std(values, seg, n_seg):
    mean = agg_mean(values, seg, n_seg)
    dev = values - mean[seg]
    return np.sqrt(agg_mean(dev * dev, seg, n_seg))


def agg_first(values, seg, n_seg):
    counts, starts = segment_starts(seg, n_seg)
    out = np.zeros((n_seg, values.shape[1]))
    nonempty = counts > 0
    out[nonempty] = values[starts[nonempty]]
    return out


def make_percentile(k: float):
    def agg_percentile(values, seg, n_seg):
        counts, starts = segment_starts(seg, n_seg)
        out = np.zeros((n_seg, values.shape[1]))
        nonempty = counts > 0
        if not nonempty.any():
            return out
        pos = (counts[nonempty] - 1) * (k / 100.0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.ceil(pos).astype(np.int64)
        frac = pos - lo
        base = starts[nonempty]
        for j in range(values.shape[1]):  # p is small: one sort per one-hot dimension
            srt = values[np.lexsort((values[:, j], seg)), j]
            out[nonempty, j] = srt[base + lo] * (1 - frac) + srt[base + hi] * frac
        return out

    return agg_percentile


class Operator:
    """One basic operator T. ``kind`` drives the grammar:
    'select' | 'filter' | 'sort' | 'transform' | 'groupby' | 'agg'.

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> ops = [Select("amount"), SortBy("amount", True), Aggregation("First", agg_first)]
    >>> view = View.of(table)
    >>> for op in ops:
    ...     view = op.apply(view)
    >>> view.values[:, 0].tolist()  # the largest amount of each entity
    [4.0, 5.0]
    """

    kind: str = ""
    name: str = ""
    column: str | None = None
    uses_order: bool = False  # reads the row order (Top5, First): may follow a SortBy
    numeric_only: bool = False  # only on numerical values (Abs)

    def apply(self, view: View) -> View:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.name}>"


class Select(Operator):
    """Select_F: the column's values, one-hot over ``categories`` if it is categorical.

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> Select("kind", ["a", "b"]).apply(View.of(table)).values.tolist()
    [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    """

    kind = "select"

    def __init__(self, column: str, categories: list[str] | None = None):
        self.column = column
        self.categories = categories  # None: numerical
        self.name = f"Select {column}"

    @property
    def categorical(self) -> bool:
        return self.categories is not None

    def apply(self, view):
        col = view.column(self.column)
        if self.categorical:  # one-hot over the most frequent values (sec. 3.2.1)
            values = (col[:, None] == np.arange(len(self.categories))[None, :]).astype(np.float64)
        else:
            values = col[:, None].astype(np.float64)
        return replace(view, values=values)


class RowFilter(Operator):
    """Keeps the rows where ``predicate(view)`` is true (FilterBy, RetainBy, Top5, your own).

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> positive = RowFilter("Positive", lambda v: v.column("amount") > 0)
    >>> positive.apply(View.of(table)).rows.tolist()
    [0, 2, 3]
    """

    kind = "filter"

    def __init__(self, name: str, predicate: Callable[[View], np.ndarray], column=None,
                 uses_order: bool = False):
        self.name = name
        self.predicate = predicate
        self.column = column
        self.uses_order = uses_order

    def apply(self, view):
        return view.keep(np.asarray(self.predicate(view), dtype=bool))


def filter_by(column: str, value: str, code: int) -> RowFilter:
    op = RowFilter(f"FilterBy {column}={value}", lambda v: v.column(column) != code, column)
    op.by, op.retain = column, False
    return op


def retain_by(column: str, value: str, code: int) -> RowFilter:
    op = RowFilter(f"RetainBy {column}={value}", lambda v: v.column(column) == code, column)
    op.by, op.retain = column, True
    return op


def _top5(view: View) -> np.ndarray:
    _, starts = segment_starts(view.seg, view.n_seg)
    return (np.arange(len(view.seg)) - starts[view.seg]) < 5


class SortBy(Operator):
    """SortBy_{F,asc|desc}: reorders each entity's events (stable).

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> SortBy("amount", descending=True).apply(View.of(table)).rows.tolist()
    [2, 0, 1, 3]
    """

    kind = "sort"

    def __init__(self, column: str, descending: bool):
        self.column = column
        self.descending = descending
        self.name = f"SortBy {column} {'desc' if descending else 'asc'}"

    def apply(self, view):
        key = view.column(self.column)
        order = np.lexsort((-key if self.descending else key, view.seg))  # stable
        return view.take(order)


class Transform(Operator):
    """Elementwise transformation of the selected values (Abs, or your own).

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> view = Select("amount").apply(View.of(table))
    >>> Transform("Abs", np.abs).apply(view).values[:, 0].tolist()
    [1.0, 2.0, 4.0, 5.0]
    """

    kind = "transform"

    def __init__(self, name: str, func: Callable[[np.ndarray], np.ndarray], numeric_only=True):
        self.name = name
        self.func = func
        self.numeric_only = numeric_only

    def apply(self, view):
        return replace(view, values=np.asarray(self.func(view.values), dtype=np.float64))


class GroupBy(Operator):
    """GroupBy_F: the next aggregation works within each category of F.

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> view = GroupBy("kind").apply(Select("amount").apply(View.of(table)))
    >>> grouped = Aggregation("Sum", agg_sum).apply(view)  # one value per (entity, kind)
    >>> grouped.seg.tolist(), grouped.values[:, 0].tolist()
    ([0, 0, 1], [5.0, -2.0, 5.0])
    """

    kind = "groupby"

    def __init__(self, column: str):
        self.column = column
        self.name = f"GroupBy {column}"

    def apply(self, view):
        return replace(view, group=view.column(self.column))


class Aggregation(Operator):
    """Reduces each segment (or each group of a pending GroupBy) to one row.

    ``func(values (n, p), seg (n,), n_seg) -> (n_seg, p)`` with ``seg`` sorted; or, with
    ``per_segment=True``, ``func(values_of_one_segment (m,)) -> float`` (slower, a loop).

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> median = Aggregation("Median", np.median, per_segment=True)
    >>> median.apply(Select("amount").apply(View.of(table))).values[:, 0].tolist()
    [1.0, 5.0]
    """

    kind = "agg"

    def __init__(self, name: str, func, per_segment: bool = False, uses_order: bool = False,
                 scalar: bool = False):
        self.name = name
        self.uses_order = uses_order
        self.scalar = scalar  # output does not depend on the selected values (Count)
        if per_segment:
            self.func = self._looped(func)
        else:
            self.func = func

    @staticmethod
    def _looped(fn):
        def vectorized(values, seg, n_seg):
            counts, starts = segment_starts(seg, n_seg)
            out = np.zeros((n_seg, values.shape[1]))
            for s in np.flatnonzero(counts):
                chunk = values[starts[s] : starts[s] + counts[s]]
                out[s] = [fn(chunk[:, j]) for j in range(values.shape[1])]
            return out

        return vectorized

    def apply(self, view):
        values, seg, n_seg = view.values, view.seg, view.n_seg
        if view.group is None:
            return View(view.table, n_seg, np.arange(n_seg), None, self.func(values, seg, n_seg))
        # GroupBy: aggregate within each (entity, category) group, groups ordered by code
        order = np.lexsort((view.group, seg))
        seg, group, values = seg[order], view.group[order], values[order]
        new = np.ones(len(seg), dtype=bool)
        new[1:] = (seg[1:] != seg[:-1]) | (group[1:] != group[:-1])
        gid = np.cumsum(new) - 1
        n_groups = int(new.sum())
        return View(view.table, n_seg, seg[new], None, self.func(values, gid, n_groups))


def default_aggregations() -> list[Aggregation]:
    """Eq. 1 (the paper lists Mean twice; it is one operator here)."""
    aggs = [
        Aggregation("Mean", agg_mean),
        Aggregation("Max", agg_max),
        Aggregation("Min", agg_min),
        Aggregation("Sum", agg_sum),
        Aggregation("Std", agg_std),
        Aggregation("Ptp", agg_ptp),
        Aggregation("Count", agg_count, scalar=True),
        Aggregation("First", agg_first, uses_order=True),
    ]
    aggs += [Aggregation(f"Percentile{k}", make_percentile(k)) for k in PERCENTILES]
    return aggs


def build_operators(schema: Schema, extra=()) -> list[Operator]:
    """The operator set T = T_select U T_agg U T_by U T_tsfm for a schema, plus ``extra``."""
    ops: list[Operator] = []
    for c in schema.numerical:
        ops.append(Select(c))
    for c in schema.categorical:
        ops.append(Select(c, schema.top(c)))
    ops += default_aggregations()
    for c in schema.categorical:
        ops.append(GroupBy(c))
        for code, value in enumerate(schema.top(c)):
            ops.append(filter_by(c, value, code))
            ops.append(retain_by(c, value, code))
    for c in schema.numerical:
        ops.append(SortBy(c, False))
        ops.append(SortBy(c, True))
    ops.append(RowFilter("Top5", _top5, uses_order=True))
    ops.append(Transform("Abs", np.abs))
    ops += list(extra)
    names = [o.name for o in ops]
    if len(set(names)) != len(names):
        raise ValueError("operator names must be unique")
    return ops


# minimum number of operators still needed to reach a valid statistic from a phase
_MIN_REMAINING = {"start": 2, "seq": 1, "grouped": 2, "groups": 1, "done": 0}


@dataclass
class _Parse:
    phase: str
    numeric: bool  # are the current values numerical (scalar per element)?
    used: set
    retained: set  # columns with a RetainBy
    filtered: set  # columns with a FilterBy
    grouped: bool
    after_sort: bool
    select: Operator | None
    count_at: int | None  # position of a Count whose output ignores the Select


class Grammar:
    """Which compositions of ``operators`` are valid statistics of depth <= ``max_depth``.

    ``next_ops(seq)`` lists the operators that may follow the prefix ``seq`` (a tuple of operator
    indices, T_1 first) such that a valid statistic can still be reached within the depth; the
    set V of valid statistics is the set of terminal sequences (module docstring).

    Examples
    --------
    >>> from online.rules.events import EventTable, infer_schema
    >>> ev = {"u": [0, 0, 0, 1], "amount": [1.0, -2.0, 4.0, 5.0], "kind": ["a", "b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u"))
    >>> g = Grammar(build_operators(infer_schema(ev, "u")), max_depth=3)
    >>> s = tuple(g.index[n] for n in ("Select amount", "RetainBy kind=a", "Sum"))
    >>> g.is_valid(s), g.label(s), g.evaluate(s, table)[:, 0].tolist()
    (True, 'Sum(Select amount | RetainBy kind=a)', [5.0, 0.0])
    >>> g.is_valid(tuple(g.index[n] for n in ("Select amount", "Mean", "Mean")))
    False
    """

    def __init__(self, operators: list[Operator], max_depth: int):
        if max_depth < 2:
            raise ValueError("max_depth must be >= 2 (Select + an aggregation)")
        self.operators = list(operators)
        self.max_depth = int(max_depth)
        self.index = {op.name: i for i, op in enumerate(self.operators)}
        # aggregations first: a depth-first completion then reaches a terminal fastest
        self._order = sorted(range(len(self.operators)),
                             key=lambda i: self.operators[i].kind != "agg")
        self._memo: dict[tuple, tuple] = {}

    def parse(self, seq: tuple) -> _Parse:
        p = _Parse("start", False, set(), set(), set(), False, False, None, None)
        for pos, i in enumerate(seq):
            op = self.operators[i]
            p.used.add(op.name)
            p.after_sort = op.kind == "sort"
            if op.kind == "select":
                p.phase, p.select = "seq", op
                p.numeric = not getattr(op, "categorical", False)
            elif op.kind == "filter" and hasattr(op, "by"):
                (p.retained if op.retain else p.filtered).add(op.by)
            elif op.kind == "groupby":
                p.phase, p.grouped = "grouped", True
            elif op.kind == "agg":
                if getattr(op, "scalar", False):
                    p.numeric = True
                    if p.phase in ("seq", "grouped"):
                        p.count_at = pos
                p.phase = {"seq": "done", "grouped": "groups", "groups": "done"}[p.phase]
        return p

    def is_terminal(self, seq: tuple) -> bool:
        return self.parse(seq).phase == "done"

    def _allowed(self, p: _Parse, op: Operator, length: int) -> bool:
        if op.name in p.used and op.kind != "agg":
            return False
        if p.after_sort and not op.uses_order:
            return False
        phase, kind = p.phase, op.kind
        if phase == "start":
            return kind == "select" and self.max_depth - length >= 1
        if phase in ("grouped", "groups"):
            return kind == "agg"
        if phase != "seq":
            return False
        if kind == "agg":
            return True
        room = self.max_depth - length  # operators still allowed after this one
        if kind == "filter":
            by = getattr(op, "by", None)
            if by is not None and by in p.retained:
                return False
            return room >= 1
        if kind == "sort":
            return not any(n.startswith("SortBy") for n in p.used) and room >= 1
        if kind == "transform":
            return (p.numeric or not op.numeric_only) and room >= 1
        if kind == "groupby":
            if p.grouped or op.column in p.retained or op.column == p.select.column:
                return False
            return room >= 2
        return False

    def next_ops(self, seq: tuple) -> tuple:
        """Operators that may follow ``seq`` (cached)."""
        seq = tuple(seq)
        if seq not in self._memo:
            p = self.parse(seq)
            if p.phase == "done" or len(seq) >= self.max_depth:
                self._memo[seq] = ()
            else:
                self._memo[seq] = tuple(
                    i for i in self._order if self._allowed(p, self.operators[i], len(seq) + 1)
                )
        return self._memo[seq]

    def is_valid(self, seq: tuple) -> bool:
        """Is ``seq`` a valid statistic (every step allowed, and terminal)?"""
        seq = tuple(seq)
        for n in range(len(seq)):
            if seq[n] not in self.next_ops(seq[:n]):
                return False
        return self.is_terminal(seq)

    def canonical_key(self, seq: tuple) -> tuple:
        """Names of the operators; when a Count ignores the values, the Select is '*' and the
        value transforms before the Count are dropped (``Count(Select x | Abs)`` is
        ``Count(events)``)."""
        names = [self.operators[i].name for i in seq]
        count_at = self.parse(seq).count_at
        if count_at is None:
            return tuple(names)
        names[0] = "Select *"
        return tuple(n for pos, n in enumerate(names)
                     if pos >= count_at or self.operators[seq[pos]].kind != "transform")

    def evaluate(self, seq: tuple, table: EventTable, entity_index=None) -> np.ndarray:
        """Values ``(n_entities, p)`` of the statistic on the given entities (all by default)."""
        view = View.of(table, entity_index)
        for i in seq:
            view = self.operators[i].apply(view)
        return view.values

    def label(self, seq: tuple) -> str:
        """The statistic in words, e.g. ``Sum(Select amount | RetainBy type=a)``; a categorical
        statistic keeps the column name (``Max(Select namespace)``) for all its dimensions."""
        return self.dimension_labels(seq, per_dimension=False)[0]

    def dimension_labels(self, seq: tuple, per_dimension: bool = True) -> list[str]:
        """One readable name per output dimension of the statistic (Table 5 style)."""
        p = self.parse(seq)
        ops = [self.operators[i] for i in seq]
        select = ops[0]
        if per_dimension and p.count_at is None and getattr(select, "categorical", False):
            heads = [f"Select {select.column}={v}" for v in select.categories]
        else:
            heads = [select.name]
        labels = []
        for head in heads:
            parts = [head]
            text = None
            for pos, op in enumerate(ops[1:], start=1):
                if op.kind == "agg":
                    if text is None:
                        if pos == p.count_at:  # the values (Select, transforms) do not count
                            parts = [n for n, o in zip(parts[1:], ops[1:pos])
                                     if o.kind != "transform"]
                        text = f"{op.name}({' | '.join(parts) or 'events'})"
                    else:
                        text = f"{op.name}({text})"
                else:
                    parts.append(op.name)
            labels.append(text)
        return labels
