"""What `grove replay` plays: supervised-to-bandit streams and logged bandit feedback.

* :func:`supervised_stream` — a labeled CSV turned into a contextual-bandit stream with the
  Bandit Forest paper's protocol (Féraud et al. 2016, sec. 5): every variable recoded into binary
  variables (numbers: 5 equal-frequency bins; other values: one-hot), rows shuffled and played
  in a loop, each binary variable flipped with probability ``noise`` at every step, reward 1
  when the action is the row's label. The recoding and the stream are those of
  ``bench/common/streams.py`` (moved here because bench/ is not installed).
* :func:`logged_feedback` — logged events with propensities, in the Open Bandit Dataset's CSV
  layout (``obd``) or a plain one (``plain``: context columns, action, reward, probability).

Bad input raises :class:`ReplayInputError` with one line saying what is wrong.

Choices where the protocol is silent
------------------------------------
- Supervised CSVs: ``?`` and empty cells are missing; rows with a missing value are dropped
  (as the bench does for Adult). "Continuous" means a numeric column with more than two
  distinct values; 0/1 columns stay one binary variable. Cut points are the 20/40/60/80 %
  quantiles of the whole column (right-closed bins); empty bins are dropped.
- Rows are shuffled once (seeded) and the same order is replayed in each loop; the noise makes
  each loop different. The same seed gives the same stream, and a shorter run is a prefix.
- OBD: the unnamed pandas index column that obp's files start with is ignored; ``item_id`` is
  the action, ``click`` the reward, ``propensity_score`` the propensity; the context is
  ``position`` (a string: the slot is a categorical), the ``user_feature_*`` columns (hashed
  strings) and the ``user-item_affinity_*`` numbers. ``timestamp`` is not a feature.
- Plain: every column other than the action, reward and probability columns is context;
  numbers stay numbers, other values are strings, missing cells are missing features (None).
- Logged events are replayed once, in file order (``--steps`` takes the first N).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd


class ReplayInputError(ValueError):
    """Input `grove replay` cannot use (missing column, bad propensity, empty file...)."""


def read_csv(path: str | Path, **kwargs) -> pd.DataFrame:
    """The CSV at ``path`` (gzip etc. by extension), or :class:`ReplayInputError`."""
    path = Path(path)
    if not path.exists():
        raise ReplayInputError(f"{path}: no such file")
    if path.is_dir():
        raise ReplayInputError(f"{path}: is a directory, not a CSV file")
    try:
        frame = pd.read_csv(path, **kwargs)
    except pd.errors.EmptyDataError:
        raise ReplayInputError(f"{path}: the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReplayInputError(f"{path}: cannot read it as CSV ({first})") from None
    if frame.empty:
        raise ReplayInputError(f"{path}: no data rows")
    return frame


# -- supervised-to-bandit streams (Bandit Forest paper, sec. 5) ---------------------------------
def equal_frequency_codes(values: np.ndarray, n_bins: int = 5) -> np.ndarray:
    """Bin index (0..n_bins-1) of each value with equal-frequency cut points.

    >>> equal_frequency_codes(np.arange(10), 5).tolist()
    [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    """
    values = np.asarray(values, dtype=float)
    edges = np.quantile(values, np.arange(1, n_bins) / n_bins)
    return np.searchsorted(edges, values, side="left")  # right-closed: edge[j-1] < v <= edge[j]


@dataclass
class Recoded:
    """A labeled data set recoded into binary variables: ``X[i, j]`` is variable
    ``feature_names[j]`` of row i, ``y[i]`` the index of row i's label in ``actions``."""

    X: np.ndarray  # uint8 (n_rows, n_features)
    y: np.ndarray  # int64 (n_rows,)
    feature_names: list[str]
    actions: list[str]
    name: str = ""


def recode(frame: pd.DataFrame, target: str, n_bins: int = 5, name: str = "") -> Recoded:
    """Recode every column except ``target`` into binary variables (sec. 5), on the whole frame."""
    columns, names = [], []
    for col in frame.columns:
        if col == target:
            continue
        values = frame[col]
        if pd.api.types.is_numeric_dtype(values) and set(np.unique(values)) <= {0, 1}:
            columns.append(values.to_numpy().astype(np.uint8)[:, None])
            names.append(str(col))
        elif pd.api.types.is_numeric_dtype(values):
            codes = equal_frequency_codes(values.to_numpy(), n_bins)
            onehot = (codes[:, None] == np.arange(n_bins)[None, :]).astype(np.uint8)
            keep = onehot.any(axis=0)
            columns.append(onehot[:, keep])
            names.extend(f"{col}:bin{j}" for j in np.flatnonzero(keep))
        else:
            cats = sorted(values.astype(str).unique())
            codes = pd.Categorical(values.astype(str), categories=cats).codes
            columns.append((codes[:, None] == np.arange(len(cats))[None, :]).astype(np.uint8))
            names.extend(f"{col}={c}" for c in cats)
    actions = sorted(frame[target].astype(str).unique())
    y = pd.Categorical(frame[target].astype(str), categories=actions).codes.astype(np.int64)
    return Recoded(np.ascontiguousarray(np.hstack(columns)), y, names, actions, name)


@dataclass
class SupervisedStream:
    """Rows of a :class:`Recoded` data set, shuffled, played in a loop, each binary variable
    flipped with probability ``noise`` at each step; reward 1 when the action is the label.

    >>> data = Recoded(np.eye(3, dtype=np.uint8), np.arange(3), ["a", "b", "c"], ["x", "y", "z"])
    >>> stream = SupervisedStream(data, noise=0.0, seed=1, chunk_size=2)
    >>> [(x, label) for x, label in stream.steps(4)]  # doctest: +NORMALIZE_WHITESPACE
    [({'a': 1, 'b': 0, 'c': 0}, 'x'), ({'a': 0, 'b': 1, 'c': 0}, 'y'),
     ({'a': 0, 'b': 0, 'c': 1}, 'z'), ({'a': 1, 'b': 0, 'c': 0}, 'x')]
    """

    data: Recoded
    noise: float = 0.05
    seed: int = 0
    chunk_size: int = 4096
    path: str = ""
    label: str = ""
    kind: str = field(default="supervised", init=False)

    @property
    def actions(self) -> list[str]:
        return self.data.actions

    def chunks(self, n_steps: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(X, label indices)`` blocks of at most ``chunk_size`` steps, ``n_steps`` in all."""
        rng = np.random.default_rng(self.seed)
        n, n_features = self.data.X.shape
        order = rng.permutation(n)
        start = 0
        while start < n_steps:
            # always draw a full chunk so that a shorter run is a prefix of a longer one
            idx = order[(start + np.arange(self.chunk_size)) % n]
            flips = rng.random((self.chunk_size, n_features), dtype=np.float32) < self.noise
            X = self.data.X[idx] ^ flips.view(np.uint8)
            m = min(self.chunk_size, n_steps - start)
            yield X[:m], self.data.y[idx[:m]]
            start += m

    def steps(self, n_steps: int) -> Iterator[tuple[dict[str, int], str]]:
        """``(context dict variable -> 0/1, label)`` for each step."""
        names, actions = self.data.feature_names, self.data.actions
        for X, y in self.chunks(n_steps):
            for row, label in zip(X.tolist(), y.tolist()):
                yield dict(zip(names, row)), actions[label]

    def labels(self, n_steps: int) -> np.ndarray:
        """The label index of each of the first ``n_steps`` steps."""
        return np.concatenate([y for _, y in self.chunks(n_steps)])

    def describe(self, n_steps: int) -> dict:
        digest = hashlib.sha256()
        for X, y in self.chunks(n_steps):
            digest.update(np.ascontiguousarray(X).tobytes())
            digest.update(y.tobytes())
        return {
            "kind": self.kind,
            "data": self.path,
            "label": self.label,
            "rows": int(self.data.X.shape[0]),
            "binary_variables": int(self.data.X.shape[1]),
            "actions": list(self.actions),
            "noise": self.noise,
            "steps": n_steps,
            "fingerprint": digest.hexdigest()[:16],
        }


def supervised_stream(path: str | Path, label: str, noise: float = 0.05, seed: int = 0
                      ) -> SupervisedStream:
    """The stream of a labeled CSV with ``label`` as the action set."""
    if not 0.0 <= noise <= 1.0:
        raise ReplayInputError(f"--noise must be in [0, 1], got {noise}")
    frame = read_csv(path, na_values=["?"], skipinitialspace=True)
    if label not in frame.columns:
        raise ReplayInputError(
            f"{path}: no label column {label!r}; columns are: {_columns(frame)}")
    frame = frame.dropna().reset_index(drop=True)
    if frame.empty:
        raise ReplayInputError(f"{path}: every row has a missing value")
    if frame.shape[1] < 2:
        raise ReplayInputError(f"{path}: no context column besides the label {label!r}")
    if frame[label].nunique() < 2:
        raise ReplayInputError(f"{path}: the label column {label!r} has a single value")
    return SupervisedStream(recode(frame, label), noise=noise, seed=seed, path=str(path),
                            label=label)


# -- logged bandit feedback ---------------------------------------------------------------------
OBD_REQUIRED = ("item_id", "position", "click", "propensity_score")
OBD_CONTEXT_PREFIXES = ("user_feature_", "user-item_affinity_")


@dataclass
class LoggedFeedback:
    """Logged events: context, played action (index into ``actions``), reward, propensity."""

    contexts: list[dict]
    actions: list[str]
    action_index: np.ndarray  # int64 (n,)
    rewards: np.ndarray  # float64 (n,)
    propensities: np.ndarray  # float64 (n,)
    path: str = ""
    format: str = ""
    kind: str = field(default="logged", init=False)

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def reward_range(self) -> tuple[float, float]:
        """[0, 1] when every reward is in it (clicks), else [min, max] of the logged rewards."""
        low, high = float(self.rewards.min()), float(self.rewards.max())
        if low >= 0.0 and high <= 1.0:
            return 0.0, 1.0
        return (low, high) if high > low else (low, low + 1.0)

    @property
    def uniform_logging(self) -> bool:
        """Whether every propensity is 1 / (number of actions): the replay method's assumption."""
        return bool(np.allclose(self.propensities, 1.0 / len(self.actions)))

    def describe(self) -> dict:
        digest = hashlib.sha256()
        digest.update(self.action_index.tobytes())
        digest.update(self.rewards.tobytes())
        digest.update(self.propensities.tobytes())
        return {
            "kind": self.kind,
            "data": self.path,
            "format": self.format,
            "events": len(self),
            "actions": list(self.actions),
            "reward_range": list(self.reward_range),
            "uniform_logging": self.uniform_logging,
            "fingerprint": digest.hexdigest()[:16],
        }


def _columns(frame: pd.DataFrame, limit: int = 12) -> str:
    cols = [str(c) for c in frame.columns]
    return ", ".join(cols[:limit]) + (f", ... ({len(cols)} in all)" if len(cols) > limit else "")


def _numeric(frame: pd.DataFrame, column: str, path) -> np.ndarray:
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ReplayInputError(
            f"{path}: column {column!r} must hold finite numbers; data row {row + 1} has "
            f"{frame[column].iloc[row]!r}")
    return values


def _context_value(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    return str(value)


def logged_feedback(path: str | Path, fmt: str, steps: int | None = None,
                    action_column: str = "action", reward_column: str = "reward",
                    propensity_column: str = "probability") -> LoggedFeedback:
    """Read logged feedback in the ``obd`` or ``plain`` layout (see the module docstring)."""
    if fmt not in ("obd", "plain"):
        raise ReplayInputError(f"unknown --format {fmt!r}: use obd or plain")
    frame = read_csv(path, nrows=steps)
    unnamed = [c for c in frame.columns if str(c).startswith("Unnamed: ") or str(c) == ""]
    frame = frame.drop(columns=unnamed)
    if fmt == "obd":
        action_column, reward_column, propensity_column = "item_id", "click", "propensity_score"
        required = OBD_REQUIRED
        context_columns = ["position"] + [c for c in frame.columns
                                          if str(c).startswith(OBD_CONTEXT_PREFIXES)]
    else:
        required = (action_column, reward_column, propensity_column)
        context_columns = [c for c in frame.columns if c not in required]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ReplayInputError(
            f"{path}: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(repr, missing))} for --format {fmt}; columns are: {_columns(frame)}")
    if fmt == "obd" and len(context_columns) == 1:
        raise ReplayInputError(
            f"{path}: no user_feature_* or user-item_affinity_* columns (--format obd)")
    propensities = _numeric(frame, propensity_column, path)
    bad = (propensities <= 0.0) | (propensities > 1.0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ReplayInputError(
            f"{path}: propensities must be in (0, 1]; column {propensity_column!r} has "
            f"{propensities[row]!r} on data row {row + 1} ({int(bad.sum())} such rows)")
    rewards = _numeric(frame, reward_column, path)
    if frame[action_column].isna().any():
        row = int(np.flatnonzero(frame[action_column].isna().to_numpy())[0])
        raise ReplayInputError(f"{path}: column {action_column!r} is empty on data row {row + 1}")
    played = frame[action_column].astype(str).to_numpy()
    actions = sorted(set(played), key=lambda a: (len(a), a))  # "2" before "10"
    if len(actions) < 2:
        raise ReplayInputError(f"{path}: the logs play a single action ({actions[0]!r})")
    index = {a: i for i, a in enumerate(actions)}
    ctx = frame[context_columns].astype(object)
    if fmt == "obd":
        ctx["position"] = ctx["position"].astype(str)
        for c in context_columns:
            if str(c).startswith("user_feature_"):
                ctx[c] = ctx[c].astype(str)
    names = [str(c) for c in context_columns]
    contexts = [dict(zip(names, map(_context_value, row)))
                for row in ctx.itertuples(index=False, name=None)]
    return LoggedFeedback(
        contexts=contexts,
        actions=actions,
        action_index=np.array([index[a] for a in played], dtype=np.int64),
        rewards=rewards,
        propensities=propensities,
        path=str(path),
        format=fmt,
    )
