"""Online recoding of context dicts into the binary variables Bandit Forest works on.

Section 5 of the paper recodes "each continuous variable using equal frequencies into 5 binary
variables, and each categorical variable into disjunctive binary variables". This module does the
same online, from the stream itself.
"""

from __future__ import annotations

import bisect
import math
import numbers

import numpy as np

__all__ = ["ContextEncoder"]

# Kinds of feature, as stored in the state.
CATEGORICAL = "categorical"  # str values, one variable per value (disjunctive coding)
BINARY = "binary"  # bool values, or numbers seen only as 0 and 1: one variable
NUMERIC = "numeric"  # numbers: one variable per equal-frequency bin
PENDING = "pending"  # numbers whose bins are not learned yet: no variable so far


class ContextEncoder:
    """Turns a context dict into a dense 0/1 vector of binary variables, learning the coding online.

    * ``str`` values are categorical: each (feature, value) seen while learning becomes one binary
      variable (disjunctive coding).
    * ``bool`` values are one binary variable.
    * Numbers are numeric: the first ``warmup`` values of a feature are kept, then frozen into
      ``n_bins`` equal-frequency bins (quantiles of those values), one binary variable per bin. A
      numeric feature whose kept values are all 0 or 1 becomes a single binary variable instead
      (later values above 0.5 count as 1).
    * ``None`` or a missing key sets none of the feature's variables. A category never seen while
      learning, a numeric feature whose bins are not learned yet, and a key never seen before also
      set no variable: they are simply not part of the coding yet. ``encode`` never changes the
      coding; only ``learn_one`` does.
    * NaN or infinite numbers raise ``ValueError``; other value types raise ``TypeError``.
    * A value of the other kind than the feature's (a string where numbers were seen, a number
      or a bool where strings were) sets none of its variables, as a missing value does. It was
      a ``ValueError``, but the policies that regress on the context code both kinds, and an
      ``auto`` policy's candidates learn one stream: ``"age": 31`` then ``"age": "unknown"``
      must not be refused by one candidate after the others learned it.

    Variables are only ever appended, so their indices, and what each one means, never change.

    Parameters
    ----------
    n_bins
        Number of equal-frequency bins of a numeric feature (5 in the paper).
    warmup
        Number of values of a numeric feature kept before its bins are frozen.

    Examples
    --------
    >>> enc = ContextEncoder(n_bins=2, warmup=4)
    >>> for x in [{"site": "a", "age": 20.0}, {"site": "b", "age": 30.0},
    ...           {"site": "a", "age": 40.0}, {"site": "a", "age": 50.0, "mobile": True}]:
    ...     enc.learn_one(x)
    >>> enc.variable_names
    ['site=a', 'site=b', 'age<35', 'age>=35', 'mobile']
    >>> enc.encode({"site": "b", "age": 45.0}).tolist()
    [0, 1, 0, 1, 0]
    >>> enc.encode({"site": "unseen", "mobile": True}).tolist()
    [0, 0, 0, 0, 1]
    """

    def __init__(self, n_bins: int = 5, warmup: int = 200):
        if n_bins < 2:
            raise ValueError(f"n_bins must be at least 2, got {n_bins}")
        if warmup < 1:
            raise ValueError(f"warmup must be at least 1, got {warmup}")
        self.n_bins = n_bins
        self.warmup = warmup
        # feature -> {"kind": ..., and per kind: "values" (categorical: value -> variable),
        #             "variable" (binary), "edges" + "first" (numeric), "seen" (pending)}
        self._features: dict[str, dict] = {}
        self._names: list[str] = []
        self._binary: dict[str, int] = {}  # binary feature -> its variable (a fast path)

    # -- reading -----------------------------------------------------------------------------

    @property
    def n_variables(self) -> int:
        return len(self._names)

    @property
    def variable_names(self) -> list[str]:
        """A readable name per binary variable, e.g. ``site=a``, ``age<40``, ``mobile``."""
        return list(self._names)

    def encode(self, x: dict) -> np.ndarray:
        """Dense int8 vector of the binary variables of ``x``; never changes the coding."""
        return self.encode_known(x)[0]

    def encode_known(self, x: dict) -> tuple[np.ndarray, bool]:
        """``(encode(x), known)``: ``known`` says that ``learn_one(x)`` would change nothing.

        That is: every feature of ``x`` is already coded (not pending) and every category of
        ``x`` is already a variable. A learner that encodes a context to decide can then reuse
        the encoding to learn from the same context (see :meth:`BanditForest.learn_one`).
        """
        active, known = self._active_variables(x)
        return np.frombuffer(active, dtype=np.int8), known

    def _active_variables(self, x: dict) -> tuple[bytearray, bool]:
        """The 0/1 bytes of the variables set by ``x`` (the hot path: one pass, no numpy per
        value; bytes, not a list of indices, which numpy converts ~60 ns per index), and
        whether ``learn_one(x)`` would change nothing."""
        if not isinstance(x, dict):
            raise ValueError(f"a context must be a dict, got {type(x).__name__}")
        active = bytearray(len(self._names))
        known = True
        features = self._features
        binary = self._binary
        for key, value in x.items():
            if value is True:  # fast path: a sparse context {name: True} of binary features
                index = binary.get(key)
                if index is not None:
                    active[index] = 1
                    continue
            elif type(value) is int:  # fast path: 0/1 numbers of a binary feature
                index = binary.get(key)
                if index is not None:
                    if value > 0.5:
                        active[index] = 1
                    continue
            value = _checked(key, value)
            if value is None:
                continue
            feature = features.get(key)
            if feature is None:
                known = False
                continue
            kind = feature["kind"]
            if kind == CATEGORICAL:
                if not isinstance(value, str):
                    continue  # the other kind: as missing (see the class doc)
                index = feature["values"].get(value)
                if index is not None:
                    active[index] = 1
                else:
                    known = False
            elif isinstance(value, str):
                continue
            elif kind == BINARY:
                if value > 0.5:
                    active[feature["variable"]] = 1
            elif kind == NUMERIC:
                active[feature["first"] + bisect.bisect_right(feature["cuts"], value)] = 1
            else:  # PENDING: learn_one keeps the value
                known = False
        return active, known

    # -- learning ----------------------------------------------------------------------------

    def learn_one(self, x: dict) -> None:
        """Extend the coding with what ``x`` shows: new categories, new features, numeric values."""
        if not isinstance(x, dict):
            raise ValueError(f"a context must be a dict, got {type(x).__name__}")
        features = self._features
        binary = self._binary
        for key, value in x.items():
            if (value is True or type(value) is int) and key in binary:  # nothing to learn
                continue
            value = _checked(key, value)
            if value is None:
                continue
            feature = features.get(key)
            if feature is None:
                feature = self._new_feature(key, value)
            kind = feature["kind"]
            if kind == CATEGORICAL:
                if not isinstance(value, str):
                    continue  # the other kind: as missing (see the class doc)
                if value not in feature["values"]:
                    feature["values"][value] = self._add_variable(f"{key}={value}")
            elif isinstance(value, str):
                continue
            elif kind == PENDING:
                feature["seen"].append(float(value))
                if len(feature["seen"]) >= self.warmup:
                    self._freeze(key)

    def learn_encode(self, x: dict) -> np.ndarray:
        """``learn_one(x)`` then ``encode(x)`` (the learning path)."""
        self.learn_one(x)
        return self.encode(x)

    def freeze(self) -> None:
        """Learn the bins of every numeric feature still pending, from the values seen so far."""
        for key, feature in list(self._features.items()):
            if feature["kind"] == PENDING and feature["seen"]:
                self._freeze(key)

    def _new_feature(self, key: str, value) -> dict:
        if isinstance(value, str):
            feature = {"kind": CATEGORICAL, "values": {}}
        elif isinstance(value, bool):
            feature = {"kind": BINARY, "variable": self._add_variable(key)}
            self._binary[key] = feature["variable"]
        else:
            feature = {"kind": PENDING, "seen": []}
        self._features[key] = feature
        return feature

    def _freeze(self, key: str) -> None:
        seen = np.asarray(self._features[key]["seen"], dtype=float)
        if np.all((seen == 0.0) | (seen == 1.0)):
            self._features[key] = {"kind": BINARY, "variable": self._add_variable(key)}
            self._binary[key] = self._features[key]["variable"]
            return
        # Equal-frequency bins: the n_bins - 1 inner quantiles; repeated values can make two
        # quantiles coincide, and then the bins merge (fewer variables, none always empty).
        edges = np.unique(np.quantile(seen, np.arange(1, self.n_bins) / self.n_bins))
        first = self.n_variables
        bounds = [None, *(float(e) for e in edges), None]
        for low, high in zip(bounds[:-1], bounds[1:]):
            if low is None:
                name = f"{key}<{high:g}"
            elif high is None:
                name = f"{key}>={low:g}"
            else:
                name = f"{low:g}<={key}<{high:g}"
            self._add_variable(name)
        self._features[key] = _numeric(edges, first)

    def _add_variable(self, name: str) -> int:
        self._names.append(name)
        return len(self._names) - 1

    # -- state -------------------------------------------------------------------------------

    def to_state(self) -> dict:
        features = {}
        for key, f in self._features.items():
            if f["kind"] == NUMERIC:
                features[key] = {"kind": NUMERIC, "edges": f["edges"].copy(), "first": f["first"]}
            elif f["kind"] == CATEGORICAL:
                features[key] = {"kind": CATEGORICAL, "values": dict(f["values"])}
            elif f["kind"] == BINARY:
                features[key] = {"kind": BINARY, "variable": f["variable"]}
            else:
                features[key] = {"kind": PENDING, "seen": np.asarray(f["seen"], dtype=float)}
        return {
            "format": "grove.context-encoder",
            "version": 1,
            "n_bins": self.n_bins,
            "warmup": self.warmup,
            "names": list(self._names),
            "features": features,
        }

    @classmethod
    def from_state(cls, state: dict) -> ContextEncoder:
        if state.get("format") != "grove.context-encoder" or state.get("version") != 1:
            raise ValueError("not a version-1 grove.context-encoder state")
        enc = cls(n_bins=int(state["n_bins"]), warmup=int(state["warmup"]))
        enc._names = [str(n) for n in state["names"]]
        for key, f in state["features"].items():
            kind = f["kind"]
            if kind == NUMERIC:
                enc._features[key] = _numeric(np.asarray(f["edges"], float), int(f["first"]))
            elif kind == CATEGORICAL:
                enc._features[key] = {
                    "kind": CATEGORICAL,
                    "values": {str(v): int(i) for v, i in f["values"].items()},
                }
            elif kind == BINARY:
                enc._features[key] = {"kind": BINARY, "variable": int(f["variable"])}
                enc._binary[key] = int(f["variable"])
            elif kind == PENDING:
                enc._features[key] = {"kind": PENDING, "seen": [float(v) for v in f["seen"]]}
            else:
                raise ValueError(f"unknown feature kind {kind!r} in encoder state")
        return enc


def _numeric(edges: np.ndarray, first: int) -> dict:
    # "cuts" is the same as "edges" as a list: bisect on it is much faster than searchsorted
    return {"kind": NUMERIC, "edges": edges, "cuts": edges.tolist(), "first": first}


def _checked(key, value):
    """``value`` if it is a valid context value (fast for str, int and finite float)."""
    kind_of_value = type(value)
    if kind_of_value is str or kind_of_value is int:
        return value
    if kind_of_value is float and value - value == 0.0:  # finite (NaN and inf give NaN)
        return value
    return _check(key, value)


def _check(key, value):
    """Validate one context value; returns it (numbers as they are), raising on bad input."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise ValueError(f"context feature {key!r} is {value}: values must be finite numbers")
        return value
    nested = " (nested objects and lists are not supported)" if isinstance(
        value, (dict, list, tuple, set)) else ""
    raise TypeError(
        f"context feature {key!r} has a {type(value).__name__} value{nested}: "
        "expected a number, a string, a bool or None"
    )
