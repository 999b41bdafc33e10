"""The sliding window of logged events a regression oracle is refitted on.

A ring buffer of the last ``size`` events: the encoded context (float32 row; columns grow as the
encoder meets new keys, NaN where an event did not have the column), the action's index, the
reward, the logged probability, and what the models of the time predicted for the event before
learning it (two float32: held out, so their errors are out of sample; NaN when there was no
model). Memory is bounded by ``size x columns x 4`` bytes plus 28 bytes per event, whatever the
length of the stream.
"""

from __future__ import annotations

import numpy as np

__all__ = ["EventWindow"]


class EventWindow:
    """The last ``size`` events (oldest first in :meth:`arrays`).

    >>> w = EventWindow(size=2)
    >>> w.append(np.array([1.0]), 0, 1.0, 0.5)
    >>> w.append(np.array([2.0, 3.0]), 1, 0.0, 0.25)
    >>> w.append(np.array([4.0]), 0, 0.5, 1.0)
    >>> X, a, r, p = w.arrays()
    >>> X.tolist(), a.tolist(), r.tolist(), p.tolist()
    ([[2.0, 3.0], [4.0, nan]], [1, 0], [0.0, 0.5], [0.25, 1.0])
    """

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"window size must be >= 1, got {size}")
        self.size = int(size)
        self._X = np.full((min(self.size, 1024), 0), np.nan, np.float32)
        self._a = np.zeros(len(self._X), np.int32)
        self._r = np.zeros(len(self._X))
        self._p = np.zeros(len(self._X))
        self._o = np.full((len(self._X), 2), np.nan, np.float32)
        self._n = 0  # ring counter: the next row is _n % size
        self._total = 0  # events appended since the start

    @property
    def n_events(self) -> int:
        """Events appended since the start (not only those still in the window)."""
        return self._total

    def __len__(self) -> int:
        return min(self._n, self.size)

    @property
    def n_columns(self) -> int:
        return self._X.shape[1]

    def append(self, x: np.ndarray, action: int, reward: float, probability: float,
               held_out: tuple[float, float] = (np.nan, np.nan)) -> None:
        d = len(x)
        if d > self._X.shape[1]:
            grown = np.full((len(self._X), max(d, 2 * self._X.shape[1])), np.nan, np.float32)
            grown[:, :self._X.shape[1]] = self._X
            self._X = grown
        i = self._n % self.size
        if i >= len(self._X):  # the ring grows to ``size`` rows as events come
            rows = min(self.size, max(2 * len(self._X), 1024))
            self._X = np.concatenate(
                [self._X, np.full((rows - len(self._X), self._X.shape[1]), np.nan, np.float32)])
            for name in ("_a", "_r", "_p"):
                old = getattr(self, name)
                setattr(self, name, np.concatenate([old, np.zeros(rows - len(old), old.dtype)]))
            self._o = np.concatenate(
                [self._o, np.full((rows - len(self._o), 2), np.nan, np.float32)])
        row = self._X[i]
        row[:d] = x
        row[d:] = np.nan
        self._a[i], self._r[i], self._p[i] = action, reward, probability
        self._o[i] = held_out
        self._n += 1
        self._total += 1

    def _order(self) -> np.ndarray:
        if self._n <= self.size:
            return np.arange(len(self))
        start = self._n % self.size
        return np.concatenate([np.arange(start, self.size), np.arange(start)])

    def held_out(self) -> np.ndarray:
        """A copy of the held-out predictions (float32 (n, 2)), oldest event first."""
        return self._o[self._order()]

    def arrays(self, n_columns: int | None = None) -> tuple[np.ndarray, ...]:
        """Copies of (X, actions, rewards, probabilities), oldest event first."""
        n = len(self)
        d = self._X.shape[1] if n_columns is None else n_columns
        order = self._order()
        X = np.full((n, d), np.nan, np.float32)
        k = min(d, self._X.shape[1])
        X[:, :k] = self._X[order, :k]
        return X, self._a[order], self._r[order], self._p[order]

    def recent(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of (X, actions, rewards) of the last ``n`` events still in the window (fewer
        if it holds fewer), oldest first."""
        n = min(n, len(self))
        rows = (self._n - n + np.arange(n)) % self.size
        return self._X[rows], self._a[rows], self._r[rows]

    def renumber_actions(self, new_index: np.ndarray) -> None:
        """Action index k becomes ``new_index[k]`` in every event held (each must have one:
        ValueError for an action with events here and none there)."""
        held = self._a[: len(self)]
        if len(held) and (held.max() >= len(new_index) or (new_index[held] < 0).any()):
            raise ValueError("an action with events in the window has no new index")
        renumbered = new_index[held] if len(held) else held
        self._a[: len(self)] = renumbered

    def nbytes(self) -> int:
        return self._X.nbytes + self._a.nbytes + self._r.nbytes + self._p.nbytes + self._o.nbytes

    def to_state(self, n_columns: int | None = None) -> dict:
        X, a, r, p = self.arrays(n_columns)
        return {"size": self.size, "n_events": self._total, "X": X, "action": a, "reward": r,
                "probability": p, "held_out": self.held_out()}

    @classmethod
    def from_state(cls, state: dict) -> EventWindow:
        w = cls(int(state["size"]))
        X = np.asarray(state["X"], np.float32)
        n = len(X)
        w._X = X.copy() if n else w._X
        w._a = np.asarray(state["action"], np.int32).copy() if n else w._a
        w._r = np.asarray(state["reward"], np.float64).copy() if n else w._r
        w._p = np.asarray(state["probability"], np.float64).copy() if n else w._p
        if "held_out" in state:  # (a window written before held-out predictions: none)
            w._o = np.asarray(state["held_out"], np.float32).reshape(-1, 2).copy() if n else w._o
        elif n:
            w._o = np.full((n, 2), np.nan, np.float32)
        w._n = n  # rows are stored oldest first: the ring continues after them
        w._total = int(state["n_events"])
        return w
