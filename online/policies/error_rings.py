"""Each action's last held-out errors, a ring sized to what the action has had.

:class:`~online.policies.drift.ResidualMonitor` keeps up to 512 errors per action (its longest test;
2,048 up to its version 2). A ring of that size for every action cost 6 kB per action (the error and
its event number; 24 kB then), also for actions played a few dozen times: an ad inventory that
changes (a campaign a day, a Personalizer request's actions) has thousands of those. Here every
action's ring is a block of one pool, and a block doubles (16, 32, ... up to the longest length) as
the action's errors come, so an action costs 12 bytes per error it has had, up to twice that.

A ring holds errors ``0, 1, ...`` at slots ``j % capacity`` of its block; a block grows only
while it has not wrapped (``capacity`` >= the errors it holds), so growing copies slots as they
are. :meth:`ErrorPool.reserve` must make room before errors are added (a compiled learner
cannot grow the pool): the kernels check it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ErrorPool"]

SMALLEST = 16  # the first block of an action (errors)


class ErrorPool:
    """The blocks of every action's ring (see the module doc).

    >>> pool = ErrorPool(n_actions=2, longest=64)
    >>> count = np.zeros(2, np.int64)
    >>> pool.reserve(np.array([0] * 20), count)
    >>> pool.capacity.tolist(), pool.used  # 20 errors to come for action 0: a block of 32
    ([32, 0], 32)
    >>> pool.reserve(np.array([1] * 500), count)  # never more than the longest test
    >>> pool.capacity.tolist()
    [32, 64]
    """

    def __init__(self, n_actions: int = 0, longest: int = 512):
        self.longest = int(longest)
        self.errors = np.zeros(0, np.float32)  # the pool: every block, and free room
        self.events = np.zeros(0, np.int64)  # the event number of each error
        self.start = np.zeros(n_actions, np.int64)  # per action, its block's first slot
        self.capacity = np.zeros(n_actions, np.int64)  # per action, its block's slots (0: none)
        self.used = 0  # slots of the pool handed out (blocks, and those left by grown blocks)

    @property
    def n_actions(self) -> int:
        return len(self.start)

    def resize(self, n_actions: int) -> None:
        """Room for ``n_actions`` actions (new ones without a block)."""
        extra = n_actions - self.n_actions
        if extra > 0:
            self.start = np.concatenate([self.start, np.zeros(extra, np.int64)])
            self.capacity = np.concatenate([self.capacity, np.zeros(extra, np.int64)])

    def reserve(self, ks: np.ndarray, count: np.ndarray) -> None:
        """Make room for an error of each of ``ks`` (action indices, repeats counted), the
        actions holding ``count`` errors now."""
        if len(ks) == 1:  # (an event learned alone: np.unique would cost ~20 us)
            self.reserve_one(int(ks[0]), count)
            return
        actions, more = np.unique(ks, return_counts=True)
        need = np.minimum(count[actions] + more, self.longest)
        short = need > self.capacity[actions]
        if short.any():
            self._grow(actions[short], need[short], count)

    def reserve_one(self, k: int, count: np.ndarray) -> None:
        """:meth:`reserve` for one error of action ``k`` (the common case: nothing to do)."""
        if count[k] >= self.capacity[k] and self.capacity[k] < self.longest:
            self._grow(np.array([k]), np.array([count[k] + 1]), count)

    def _grow(self, actions: np.ndarray, need: np.ndarray, count: np.ndarray) -> None:
        """New blocks of a power of two >= ``need`` for ``actions``, their errors copied."""
        sizes = np.maximum(SMALLEST, 2 ** np.ceil(np.log2(np.maximum(need, 1)))).astype(np.int64)
        sizes = np.minimum(sizes, self.longest)
        if self.used + int(sizes.sum()) > len(self.errors):
            self._pack(room=int(sizes.sum()))
        for k, size in zip(actions.tolist(), sizes.tolist()):
            old, held = int(self.start[k]), int(min(count[k], self.capacity[k]))
            new = self.used
            self.errors[new:new + held] = self.errors[old:old + held]  # (not wrapped: in order)
            self.events[new:new + held] = self.events[old:old + held]
            self.start[k], self.capacity[k] = new, size
            self.used += size

    def _pack(self, room: int = 0) -> None:
        """Lay the blocks out one after another, in action order, with ``room`` slots more
        than they need and as many again (the slots grown blocks left are reclaimed)."""
        total = int(self.capacity.sum())
        starts = np.cumsum(self.capacity) - self.capacity
        source = np.repeat(self.start - starts, self.capacity) + np.arange(total)
        size = max(1024, 2 * (total + room))
        errors, events = np.zeros(size, np.float32), np.zeros(size, np.int64)
        errors[:total], events[:total] = self.errors[source], self.events[source]
        self.errors, self.events, self.start, self.used = errors, events, starts, total

    def select(self, keep: np.ndarray) -> None:
        """Keep the actions ``keep`` only (ascending), renumbered 0, 1, ... in that order."""
        keep = keep[keep < self.n_actions]
        self.start, self.capacity = self.start[keep], self.capacity[keep]
        self._pack()

    def slots(self, k: int, count: int) -> np.ndarray:
        """The pool slots of action ``k``'s errors, oldest first (it has had ``count``)."""
        capacity = int(self.capacity[k])
        held = min(int(count), capacity)
        return self.start[k] + (count - held + np.arange(held)) % max(capacity, 1)

    def nbytes(self) -> int:
        return self.errors.nbytes + self.events.nbytes + self.start.nbytes + self.capacity.nbytes

    def to_state(self) -> dict:
        """The blocks one after another in action order (no free room)."""
        self._pack()
        total = self.used
        return {"capacity": self.capacity.copy(), "errors": self.errors[:total].copy(),
                "events": self.events[:total].copy()}

    @classmethod
    def from_state(cls, state: dict, longest: int) -> ErrorPool:
        pool = cls(0, longest)
        pool.capacity = np.asarray(state["capacity"], np.int64).copy()
        pool.start = np.cumsum(pool.capacity) - pool.capacity
        pool.errors = np.asarray(state["errors"], np.float32).copy()
        pool.events = np.asarray(state["events"], np.int64).copy()
        pool.used = len(pool.errors)
        return pool

    @classmethod
    def from_rows(cls, errors: np.ndarray, events: np.ndarray, count: np.ndarray) -> ErrorPool:
        """From one ring of ``errors.shape[1]`` slots per action (a monitor's version 1)."""
        longest = errors.shape[1]
        pool = cls(len(count), longest)
        none = np.zeros(len(count), np.int64)  # (nothing to copy from the empty pool)
        for k, n in enumerate(count.tolist()):
            held = min(n, longest)  # a wrapped ring keeps its slots: its block is longest
            if held:
                pool._grow(np.array([k]), np.array([held]), none)
                block = slice(int(pool.start[k]), int(pool.start[k]) + held)
                pool.errors[block], pool.events[block] = errors[k, :held], events[k, :held]
        return pool
