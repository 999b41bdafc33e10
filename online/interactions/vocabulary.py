"""Fields and category codes for MCTS-IS, and the composite features of Appendix B.2.

The paper numbers the values of predictor i as 1..K_i, known in advance. Online, the K_i values
are learned as they appear: a field's categories get codes 0, 1, ... in order of first
appearance; a missing field (or NaN) is the category ``None``. With ``max_categories`` the first
``max_categories - 1`` values keep their own code and every later value shares the code of
``OTHER`` (the usual CTR preprocessing that maps rare values to one bucket).

Appendix B.2 groups many small-cardinality features into composite features (TYGEM: 48 ternary
features into 8 groups of 6, K = 3^6). With ``groups=k`` the raw fields of the first sample are
shuffled with the seeded generator and dealt round-robin into k groups; a field first seen later
joins the smallest group. A composite value is the JSON list of its members' values.
"""

from __future__ import annotations

import json
import math

import numpy as np

OTHER = "<other>"


def normalize(value):
    """Plain Python scalar for a feature value (numpy scalars unwrapped, NaN -> None)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _canonical(names):
    return sorted(names, key=lambda name: (type(name).__name__, str(name)))


def _encode(value) -> str:
    try:
        return json.dumps(value)
    except TypeError:
        raise ValueError(
            f"MCTSInteractions state holds JSON scalars only; cannot export {value!r}"
        ) from None


class Vocabulary:
    """Field ids, per-field category codes, and optional grouping into composite fields."""

    def __init__(self, max_categories: int | None = None, groups: int | None = None):
        self.max_categories = max_categories
        self.groups = groups
        self.fields: list = []  # names of the fields the FDT splits on (composites if grouped)
        self.field_index: dict = {}
        self.values: list[list] = []  # code -> value, per field
        self.codes: list[dict] = []  # value -> code, per field
        self.raw_fields: list = []  # grouping only: raw field names ...
        self.raw_group: list[int] = []  # ... and the group each belongs to

    # -- grouping (Appendix B.2) ---------------------------------------------------------------

    def _group_row(self, x: dict, rng: np.random.Generator | None) -> dict:
        if rng is not None:
            new = _canonical([k for k in x if k not in set(self.raw_fields)])
            if new:
                if not self.raw_fields:
                    order = rng.permutation(len(new))
                    for pos, i in enumerate(order.tolist()):
                        self.raw_fields.append(new[i])
                        self.raw_group.append(pos % self.groups)
                else:
                    for name in new:
                        sizes = np.bincount(self.raw_group, minlength=self.groups)
                        self.raw_fields.append(name)
                        self.raw_group.append(int(np.argmin(sizes)))
        members: dict[int, list] = {}
        for name, g in zip(self.raw_fields, self.raw_group):
            members.setdefault(g, []).append(normalize(x.get(name)))
        return {f"group{g}": json.dumps(vals) for g, vals in sorted(members.items())}

    # -- codes ---------------------------------------------------------------------------------

    @property
    def n_categories(self) -> np.ndarray:
        return np.array([len(v) for v in self.values], dtype=np.int64)

    def _add_field(self, name) -> None:
        self.field_index[name] = len(self.fields)
        self.fields.append(name)
        self.values.append([])
        self.codes.append({})

    def _learn_value(self, i: int, value) -> int:
        codes = self.codes[i]
        code = codes.get(value)
        if code is not None:
            return code
        cap = self.max_categories
        if cap is not None and len(self.values[i]) >= cap - 1:
            value = OTHER
            code = codes.get(OTHER)
            if code is not None:
                return code
        code = len(self.values[i])
        codes[value] = code
        self.values[i].append(value)
        return code

    def _lookup(self, i: int, value) -> int:
        code = self.codes[i].get(value)
        if code is not None:
            return code
        cap = self.max_categories
        if cap is not None and len(self.values[i]) >= cap - 1:
            return self.codes[i].get(OTHER, -1)
        return -1

    def learn_row(self, x: dict, rng: np.random.Generator) -> np.ndarray:
        """Codes of one sample for every known field, registering new fields and values."""
        if self.groups:
            x = self._group_row(x, rng)
        for name in _canonical([k for k in x if k not in self.field_index]):
            self._add_field(name)
        return np.array(
            [
                self._learn_value(i, normalize(x.get(name)))
                for i, name in enumerate(self.fields)
            ],
            dtype=np.int64,
        )

    def encode_row(self, x: dict) -> np.ndarray:
        """Codes of one sample, without learning anything: -1 for an unknown value."""
        if self.groups:
            x = self._group_row(x, None)
        return np.array(
            [
                self._lookup(i, normalize(x.get(name)))
                for i, name in enumerate(self.fields)
            ],
            dtype=np.int64,
        )

    def _frame_codes(self, X, learn: bool) -> np.ndarray:
        import pandas as pd

        out = np.empty((len(X), len(self.fields)), dtype=np.int64)
        for i, name in enumerate(self.fields):
            if name not in X.columns:
                out[:, i] = (
                    self._learn_value(i, None) if learn else self._lookup(i, None)
                )
                continue
            # factorize keeps first-appearance order, so values get the codes row-by-row
            # learning would give them; NaN is the sentinel -1 -> None
            idx, uniques = pd.factorize(X[name], use_na_sentinel=True)
            values = [normalize(u) for u in uniques.tolist()]
            if learn:
                if (idx < 0).any():  # None takes its code where the first NaN appears
                    first_na = int(np.argmax(idx < 0))
                    before = int(idx[:first_na].max()) + 1 if first_na else 0
                    for v in values[:before]:
                        self._learn_value(i, v)
                    self._learn_value(i, None)
                for v in values:
                    self._learn_value(i, v)
            lookup = np.array(
                [self._lookup(i, v) for v in values] + [self._lookup(i, None)]
            )
            out[:, i] = lookup[idx]  # idx == -1 picks the last entry: None's code
        return out

    def learn_frame(self, X, rng: np.random.Generator) -> np.ndarray:
        """Codes of a DataFrame's rows, registering values in row order (as ``learn_row``)."""
        if self.groups:
            return np.stack([self.learn_row(row, rng) for row in X.to_dict("records")])
        for name in _canonical([k for k in X.columns if k not in self.field_index]):
            self._add_field(name)
        return self._frame_codes(X, learn=True)

    def encode_frame(self, X) -> np.ndarray:
        """Codes of a DataFrame's rows, without learning anything: -1 for an unknown value."""
        if self.groups:
            return np.stack([self.encode_row(row) for row in X.to_dict("records")])
        return self._frame_codes(X, learn=False)

    # -- state ---------------------------------------------------------------------------------

    def to_state(self) -> dict:
        flat = [_encode(v) for vals in self.values for v in vals]
        return {
            "fields": np.array([_encode(n) for n in self.fields], dtype=str),
            "values": np.array(flat, dtype=str),
            "offsets": np.cumsum([0] + [len(v) for v in self.values]).astype(np.int64),
            "raw_fields": np.array([_encode(n) for n in self.raw_fields], dtype=str),
            "raw_group": np.array(self.raw_group, dtype=np.int64),
        }

    @classmethod
    def from_state(cls, state: dict, max_categories, groups) -> Vocabulary:
        vocab = cls(max_categories, groups)
        offsets = np.asarray(state["offsets"]).tolist()
        values = [json.loads(v) for v in np.asarray(state["values"]).tolist()]
        for k, name in enumerate(np.asarray(state["fields"]).tolist()):
            vocab._add_field(json.loads(name))
            for value in values[offsets[k] : offsets[k + 1]]:
                vocab.codes[k][value] = len(vocab.values[k])
                vocab.values[k].append(value)
        vocab.raw_fields = [
            json.loads(n) for n in np.asarray(state["raw_fields"]).tolist()
        ]
        vocab.raw_group = [int(g) for g in np.asarray(state["raw_group"]).tolist()]
        return vocab
