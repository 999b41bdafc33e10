"""Behaviour sequences as one flat event table sorted by entity, with segment offsets.

RuDi's statistics (sec. 3.2.1) act on each entity's sequence. Rather than loop over entities,
every operator works on all of a batch's events at once: events are sorted by entity (then by
the order column), ``offsets[i]:offsets[i+1]`` is entity ``i``'s segment, and an operator sees
``seg`` (the entity position of every event) next to the event values.

Choices where the paper is silent or ambiguous
----------------------------------------------
- Columns with a numeric dtype (not bool) are numerical, everything else categorical, unless
  ``categorical`` names them. Categorical values are compared as strings.
- Missing numerical values become 0 (aggregations of NaN would poison the correlations).
- A categorical column's codes are in decreasing order of frequency in the fitting data, so
  the ``max_categories`` most frequent values are codes ``0..max_categories-1``: only those get
  a one-hot dimension (Select) and FilterBy/RetainBy operators. Values unseen at fit time get
  code -1 (they still count as events, and GroupBy puts them in one group).
- The order column (if any) only orders events within an entity; it is not a feature. Without
  it, the input order of each entity's events is kept (stable sort).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def _column(events, name: str) -> np.ndarray:
    """One column of a pandas DataFrame or of a dict of columns, as a numpy array."""
    col = events[name]
    if hasattr(col, "to_numpy"):
        return col.to_numpy()
    return np.asarray(col)


def column_names(events) -> list[str]:
    """Column names of a DataFrame (``.columns``) or a dict of columns (its keys)."""
    if hasattr(events, "columns"):
        return [str(c) for c in events.columns]
    return [str(c) for c in events]


def is_numeric(values: np.ndarray) -> bool:
    return values.dtype.kind in "iuf"


@dataclass
class Schema:
    """What the fit saw: numerical and categorical columns and each category's vocabulary.

    Examples
    --------
    >>> ev = {"u": [0, 0, 1], "amount": [1.0, 2.0, 3.0], "kind": ["b", "a", "b"]}
    >>> schema = infer_schema(ev, "u")
    >>> schema.numerical, schema.categorical, schema.vocab
    (['amount'], ['kind'], {'kind': ['b', 'a']})
    >>> Schema.from_state(schema.to_state()) == schema
    True
    """

    numerical: list[str]
    categorical: list[str]
    vocab: dict[str, list[str]]  # categorical column -> values, most frequent first
    max_categories: int

    def top(self, column: str) -> list[str]:
        """The values that get a one-hot dimension and By-operators."""
        return self.vocab[column][: self.max_categories]

    def to_state(self) -> dict:
        return {
            "numerical": list(self.numerical),
            "categorical": list(self.categorical),
            "vocab": {c: list(v) for c, v in self.vocab.items()},
            "max_categories": int(self.max_categories),
        }

    @classmethod
    def from_state(cls, state: dict) -> Schema:
        return cls(
            list(state["numerical"]),
            list(state["categorical"]),
            {c: list(v) for c, v in state["vocab"].items()},
            int(state["max_categories"]),
        )


def infer_schema(
    events, entity_col: str, order_col=None, categorical=None, max_categories: int = 10
) -> Schema:
    """Split the feature columns into numerical and categorical ones and build vocabularies."""
    forced = set(categorical or ())
    numerical, cats, vocab = [], [], {}
    for name in column_names(events):
        if name in (entity_col, order_col):
            continue
        values = _column(events, name)
        if name not in forced and is_numeric(values):
            numerical.append(name)
        else:
            cats.append(name)
            uniq, counts = np.unique(values.astype(str), return_counts=True)
            order = np.lexsort((uniq, -counts))  # most frequent first, ties by value
            vocab[name] = [str(v) for v in uniq[order]]
    return Schema(numerical, cats, vocab, int(max_categories))


@dataclass
class EventTable:
    """Events sorted by entity; ``offsets`` delimit each entity's segment.

    Examples
    --------
    >>> ev = {"u": ["y", "x", "y"], "t": [2, 1, 1], "kind": ["b", "a", "b"]}
    >>> table = EventTable.from_events(ev, "u", infer_schema(ev, "u", order_col="t"), "t")
    >>> table.entities.tolist(), table.offsets.tolist(), table.columns["kind"].tolist()
    (['x', 'y'], [0, 1, 3], [1, 0, 0])
    >>> table.batch_rows([1])
    (array([1, 2]), array([0, 0]))
    """

    schema: Schema
    entities: np.ndarray  # sorted unique entity ids
    offsets: np.ndarray  # (n_entities + 1,)
    columns: dict[str, np.ndarray] = field(default_factory=dict)  # float64 or int64 codes

    @property
    def n_entities(self) -> int:
        return len(self.entities)

    @classmethod
    def from_events(cls, events, entity_col: str, schema: Schema, order_col=None) -> EventTable:
        ent = _column(events, entity_col)
        keys = (ent,) if order_col is None else (_column(events, order_col), ent)
        order = np.lexsort(keys)  # stable: ties keep the input order
        entities, counts = np.unique(ent[order], return_counts=True)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        columns = {}
        for name in schema.numerical:
            values = np.asarray(_column(events, name)[order], dtype=np.float64)
            columns[name] = np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
        for name in schema.categorical:
            lookup = {v: i for i, v in enumerate(schema.vocab[name])}
            raw = _column(events, name)[order].astype(str)
            uniq, inverse = np.unique(raw, return_inverse=True)
            codes_of_uniq = np.array([lookup.get(str(u), -1) for u in uniq], dtype=np.int64)
            columns[name] = codes_of_uniq[inverse]
        return cls(schema, entities, offsets, columns)

    def batch_rows(self, entity_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Event rows of the given entities (in that order) and their segment ids 0..B-1."""
        entity_index = np.asarray(entity_index, dtype=np.int64)
        starts = self.offsets[entity_index]
        lengths = self.offsets[entity_index + 1] - starts
        seg = np.repeat(np.arange(len(entity_index)), lengths)
        first = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        rows = starts[seg] + (np.arange(len(seg)) - first[seg])
        return rows.astype(np.int64), seg
