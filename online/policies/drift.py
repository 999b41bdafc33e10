"""Detecting that an action's rewards changed: a test on the oracle's held-out errors.

Traffic is not stationary: a campaign ends, tastes change, and an action that earned stops
earning. A regression oracle refitted on a sliding window follows such a change only as fast as
the window forgets, and a 100,000-event window holding 6,000 events of the old world keeps
predicting it for thousands of events (measured in ``bench/policies/drift.py``). The oracle's
own errors tell sooner: for the action it plays, the model predicted a reward before seeing it
(the *held-out* prediction), and after a change these errors stop averaging zero.

:class:`ResidualMonitor` keeps, per action, its last ``capacity`` held-out errors and after each
one tests, for each length m of ``lengths``, whether the mean of the last m errors is zero. The
null hypothesis is that the models in use are unbiased for the contexts the policy plays the
action in: each error ``reward - prediction`` is then a martingale difference. With the rewards
in a range of width ``R`` and the prediction clipped to it (:meth:`watch`), the error lies in
``[low - prediction, high - prediction]``, an interval of width R known before the reward comes
(``low`` and ``high`` are the rewards seen: known once the rewards' extremes have come), so the
Azuma-Hoeffding bound is ``P(|mean| >= eps) <= 2 exp(-2 m eps^2 / R^2)`` (errors known
only to lie in ``[-R, R]``, :meth:`observe`'s, have width 2R: ``2 exp(-m eps^2 / (2 R^2))``).
The test at the t-th error (of all actions) and each length spends
``delta * 6 / (pi^2 t^2 len(lengths))`` of the error budget, so that over the whole stream the
chance of a false alarm is at most ``delta`` (an anytime union bound: the test is read after
every error).

Why lengths 16 to 512. Version 2 of this test bounded :meth:`watch`'s errors as if they could lie
anywhere in ``[-R, R]`` and tested lengths 64 to 2,048; with the interval's true width the same six
thresholds (0.98 R at m = 16 down to 0.17 R at m = 512, at t = 10^5) are reached with a quarter of
the errors, so a change is found four times sooner and the smallest shift detected is what it was.
That floor is kept, not lowered, because the null is only nearly true: the models are refitted, and
a linear model is misspecified. Measured on stationary streams, the mean held-out error of an
action's 1,024 consecutive plays stayed within 0.13 of zero for LinUCB (Letter, Adult, Shuttle,
vowel, splice, the MOOC stream); the trees', over a refit's period, within 0.05. 2,048 errors at
this bound would test 0.09 R. A detection is the evidence a change-detection restart needs (the
monitoring idea of M-UCB, Cao et al., AISTATS 2019, on the oracle's errors rather than on raw
rewards, which shift with the contexts the policy plays each action in).

When a test rejects, the change point is the least-squares split of the action's kept errors
into two means: the j that maximizes ``(S_j - (j/n) S_n)^2 / (j (n - j))`` (the CUSUM statistic
of Page 1954, standardized; the raw ``|S_j - (j/n) S_n|`` of version 2 favours the middle, and
a change found after a few dozen of 512 errors was placed a few hundred errors too early), and
:meth:`observe` returns the event index where the new regime starts. The tree-ensemble
policy then leaves the action's events before it out of its fits and refits; LinUCB, which
keeps sums rather than events, restarts the action (it tests inside its compiled learning loop:
:func:`watch_error`, what :meth:`ResidualMonitor.watch` calls).

An action's errors are kept in a ring sized to what it has had (16 slots, doubling up to the
longest length: :mod:`~online.policies.error_rings`), not one of the longest length per action:
an ad inventory has many actions that are played a few dozen times.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from online.policies.error_rings import ErrorPool

__all__ = ["ActionChanges", "ResidualMonitor"]

LENGTHS = (16, 32, 64, 128, 256, 512)


class ResidualMonitor:
    """Per action, the last ``capacity`` held-out errors and the tests above.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> monitor = ResidualMonitor(n_actions=2, delta=0.01)
    >>> cuts = [monitor.observe(0, rng.normal(0, 0.1), t, 1.0) for t in range(5000)]
    >>> sum(c is not None for c in cuts)  # errors around zero: no alarm
    0
    >>> for t in range(5000, 6000):  # the action stops earning: errors near -1
    ...     cut = monitor.observe(0, -1.0 + rng.normal(0, 0.1), t, 1.0)
    ...     if cut is not None:
    ...         break
    >>> t - 5000 + 1, cut  # found after 15 errors; the new regime: from event 5000
    (15, 5000)
    """

    FORMAT = "grove.residual-monitor"
    VERSION = 3  # 3: lengths 16-512, watch's errors of width R; 2: lengths 64-2,048, width 2R,
    # each action's ring a block of a pool (error_rings); 1: one row each

    def __init__(self, n_actions: int = 0, delta: float = 0.01,
                 lengths: tuple[int, ...] = LENGTHS):
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        self.delta = float(delta)
        self.lengths = np.asarray(lengths, np.int64)
        self._pool = ErrorPool(n_actions, int(self.lengths.max()))
        self._count = np.zeros(n_actions, np.int64)  # errors kept per action (ring counter)
        self._sums = np.zeros((n_actions, len(self.lengths)))  # sum of the last m, per length
        self._tally = np.zeros(1, np.int64)  # errors tested, all actions: the t of the bound
        self._bounds = np.array([math.inf, -math.inf])  # the rewards seen (:meth:`watch`)
        self._followed = 0  # actions tested at a change point found (:meth:`changed_with`)

    @property
    def n_actions(self) -> int:
        return len(self._count)

    @property
    def _tests(self) -> int:
        return int(self._tally[0])

    @property
    def scale(self) -> float:
        """The range of the rewards seen (what :meth:`watch`'s errors are bounded by)."""
        return float(self._bounds[1] - self._bounds[0])

    def rings(self) -> Rings:
        """The arrays, for a compiled learner that tests as it learns (:func:`watch_error`)."""
        p = self._pool
        return Rings(p.errors, p.events, p.start, p.capacity, self._count, self._sums,
                     self.lengths, self._tally, self._bounds)

    def reserve(self, ks: np.ndarray) -> None:
        """Make room for an error of each of ``ks`` (before a compiled learner adds them;
        :meth:`observe` and :meth:`watch` make their own)."""
        self._pool.reserve(ks, self._count)

    def resize(self, n_actions: int) -> None:
        """Room for ``n_actions`` actions (new ones start empty)."""
        extra = n_actions - self.n_actions
        if extra > 0:
            self._pool.resize(n_actions)
            self._count = np.concatenate([self._count, np.zeros(extra, np.int64)])
            self._sums = np.vstack([self._sums, np.zeros((extra, len(self.lengths)))])

    def select(self, keep: np.ndarray) -> None:
        """Keep the actions ``keep`` only (ascending), renumbered 0, 1, ... in that order."""
        keep = keep[keep < self.n_actions]
        self._pool.select(keep)
        self._count, self._sums = self._count[keep], self._sums[keep]

    def clear(self, k: int) -> None:
        """Forget action ``k``'s errors (its models are about to change)."""
        self._count[k] = 0
        self._sums[k] = 0.0

    def observe(self, k: int, error: float, event: int, width: float) -> int | None:
        """Add action ``k``'s held-out error of event number ``event``, which lies in an interval
        of ``width`` known before it came (so in ``[-width, width]`` under the null: clipped to
        it); the event where a new regime starts if a test rejects, else None. After a
        rejection the action's errors are cleared."""
        if not width > 0.0:
            raise ValueError(f"width must be > 0, got {width!r}")
        self._pool.reserve_one(k, self._count)
        cut = test_error(self.rings(), k, min(max(error, -width), width), event, width,
                         self.delta)
        return None if cut < 0 else int(cut)

    def watch(self, k: int, reward: float, predicted: float, event: int) -> int | None:
        """:meth:`observe` of ``reward - predicted``, the prediction clipped to the rewards seen
        (``reward`` included), whose range is the scale: the error lies in an interval of that
        width (the module doc); nothing is tested while the rewards have shown no range."""
        self._pool.reserve_one(k, self._count)
        cut = watch_error(self.rings(), k, reward, predicted, event, self.delta)
        return None if cut < 0 else int(cut)

    def widen(self, reward: float) -> None:
        """Count ``reward`` among the rewards seen, for an event whose error is not tested."""
        widen_bounds(self._bounds, reward)

    def changed_with(self, k: int, start: int, others) -> list[int]:
        """Action ``k`` changed from event ``start`` on (what :meth:`watch` returned): ``k``
        and each of ``others`` whose errors since ``start`` changed too (:meth:`shifted_since`),
        their errors cleared."""
        changed = [k]
        for j in others:
            if j != k:
                self._followed += 1
                if self.shifted_since(j, start, self.scale, self._followed):
                    changed.append(j)
        for j in changed:
            self.clear(j)
        return changed

    def shifted_since(self, k: int, start: int, scale: float, n_tests: int) -> bool:
        """Whether action ``k``'s errors of events ``start`` and later (those it still keeps,
        :meth:`watch`'s: each in an interval of width ``scale``) have a mean other than zero, by
        Hoeffding's bound at ``delta * 6 / (pi^2 n_tests^2)``:
        the test of one more action once another's change started at ``start``. A change point
        found once is one hypothesis per action, not a search over time, so it needs far fewer
        errors than :meth:`observe`'s test (which also loses power as refits mix the old events
        with the new into an action's models)."""
        slots = self._pool.slots(k, int(self._count[k]))
        p = self._pool
        after = p.errors[slots][p.events[slots] >= start].astype(np.float64)
        if not len(after):
            return False
        log_term = math.log(math.pi ** 2 * n_tests ** 2 / (3.0 * self.delta))
        mean = float(np.clip(after, -scale, scale).mean())
        return mean * mean * len(after) > scale * scale * log_term / 2.0

    def to_state(self) -> dict:
        return {"format": self.FORMAT, "version": self.VERSION, "delta": self.delta,
                "lengths": self.lengths.copy(), **self._pool.to_state(),
                "count": self._count.copy(),
                "sums": self._sums.copy(), "tests": self._tests, "followed": self._followed,
                "bounds": [b if math.isfinite(b) else None for b in self._bounds.tolist()]}

    @classmethod
    def from_state(cls, state: dict) -> ResidualMonitor:
        """Versions 1 (one ring of the longest length per action) and 2 are read, and go on
        as this version's test (:meth:`_quartered`)."""
        if state.get("format") != cls.FORMAT or state.get("version") not in (1, 2, cls.VERSION):
            raise ValueError(f"not a {cls.FORMAT} state of version 1 to {cls.VERSION}: "
                             f"{state.get('format')!r} {state.get('version')!r}")
        monitor = cls(0, float(state["delta"]), tuple(np.asarray(state["lengths"]).tolist()))
        monitor._count = np.asarray(state["count"], np.int64).copy()
        if state["version"] == 1:
            monitor._pool = ErrorPool.from_rows(np.asarray(state["errors"], np.float32),
                                                np.asarray(state["events"], np.int64),
                                                monitor._count)
        else:
            monitor._pool = ErrorPool.from_state(state, int(monitor.lengths.max()))
        monitor._sums = np.asarray(state["sums"], np.float64).copy()
        monitor._tally[0] = int(state["tests"])
        monitor._followed = int(state["followed"])
        low, high = state["bounds"]
        monitor._bounds[:] = (math.inf if low is None else low, -math.inf if high is None else high)
        if state["version"] < 3:
            monitor._quartered()
        return monitor

    def _quartered(self) -> None:
        """A version 1-2 test as this version's: each length m becomes m / 4 (the same threshold
        now that :meth:`watch`'s errors are bounded by their interval's width), each action
        keeps its last errors up to the new longest length, where this version's ring holds
        them, and the sums are the new lengths'."""
        lengths = np.maximum(self.lengths // 4, 1)
        longest = int(lengths.max())
        errors = np.zeros((self.n_actions, longest), np.float32)
        events = np.zeros((self.n_actions, longest), np.int64)
        sums = np.zeros((self.n_actions, len(lengths)))
        for k, n in enumerate(self._count.tolist()):
            h = min(n, longest)
            slots = self._pool.slots(k, n)
            last = slots[len(slots) - h:]  # the last h errors, oldest first
            ring = (n - h + np.arange(h)) % longest  # their slots in a ring of ``longest``
            errors[k, ring], events[k, ring] = self._pool.errors[last], self._pool.events[last]
            for i, m in enumerate(lengths.tolist()):
                sums[k, i] = self._pool.errors[last[max(h - m, 0):]].astype(np.float64).sum()
        self.lengths, self._sums = lengths, sums
        self._pool = ErrorPool.from_rows(errors, events, self._count)

    def nbytes(self) -> int:
        return self._pool.nbytes() + self._count.nbytes + self._sums.nbytes


class Rings(NamedTuple):
    """:class:`ResidualMonitor`'s arrays, as a compiled learner takes them."""

    errors: np.ndarray  # float32 pool: each action's last errors, a ring in a block of it
    events: np.ndarray  # int64 pool: their event numbers
    start: np.ndarray  # int64 (n_actions,): the first slot of each action's block
    capacity: np.ndarray  # int64 (n_actions,): its slots (error_rings.ErrorPool)
    count: np.ndarray  # int64 (n_actions,): errors added since the action's last clear
    sums: np.ndarray  # float64 (n_actions, len(lengths)): the sum of its last m errors
    lengths: np.ndarray  # int64: the lengths m tested
    tally: np.ndarray  # int64 (1,): errors tested, all actions
    bounds: np.ndarray  # float64 (2,): the lowest and highest reward seen


@numba.njit(cache=True, nogil=True)
def widen_bounds(bounds, reward):
    """Widen ``bounds`` (the lowest and highest reward seen) to ``reward``; their range."""
    bounds[0] = min(bounds[0], reward)
    bounds[1] = max(bounds[1], reward)
    return bounds[1] - bounds[0]


@numba.njit(cache=True, nogil=True)
def watch_error(rings, k, reward, predicted, event, delta):
    """:meth:`ResidualMonitor.watch`, callable inside a compiled learner: ``rings.bounds`` is
    widened to ``reward`` and the error is ``reward - predicted`` with ``predicted`` clipped to
    it. Returns the change's start or -1."""
    bounds = rings.bounds
    scale = widen_bounds(bounds, reward)
    if not scale > 0.0:
        return -1
    return test_error(rings, k, reward - min(max(predicted, bounds[0]), bounds[1]), event,
                      scale, delta)  # (in [low - predicted, high - predicted]: width scale)


@numba.njit(cache=True, nogil=True)
def test_error(rings, k, error, event, width, delta):
    """The error, which lies in an interval of ``width`` known before it came, tested at the
    union bound's next t (``rings.tally``); on a rejection the action's errors are cleared.
    Returns the change's start or -1."""
    rings.tally[0] += 1
    t = np.float64(rings.tally[0])
    log_term = math.log(math.pi ** 2 * (t * t) * rings.lengths.shape[0] / (3.0 * delta))
    cut = observe_error(rings, k, error, event, width * width * log_term / 2.0)
    if cut >= 0:
        rings.count[k] = 0
        rings.sums[k, :] = 0.0
    return cut


@numba.njit(cache=True, nogil=True)
def observe_error(rings, k, error, event, bound):
    """Add ``error`` to action ``k``'s ring (``rings.errors``, ``rings.events``: each action's
    last errors and their event numbers, in its block; ``count``: errors added since its last
    clear; ``sums``: the sum of its last m errors, per length of ``lengths``; the block must
    have room: ``ErrorPool.reserve``) and test each length m: reject when ``(sum of the last m)^2 >
    m * bound`` (``bound = w^2 ln(2 / delta_t) / 2`` for errors each in an interval of width w,
    Azuma-Hoeffding's ``|mean| >= w sqrt(ln(2 / delta_t) / (2 m))``). Returns the event where the
    new regime starts (the least-squares split of the kept errors, the module doc) or -1."""
    errors, events, count, sums, lengths = (rings.errors, rings.events, rings.count,
                                            rings.sums, rings.lengths)
    capacity, base = rings.capacity[k], rings.start[k]
    n = count[k]
    if n >= capacity and capacity < lengths.max():
        raise ValueError("no room in the action's ring: ErrorPool.reserve it first")
    error = np.float64(np.float32(error))  # as kept: the sums subtract what they added
    for i in range(lengths.shape[0]):
        m = lengths[i]
        sums[k, i] += error
        if n >= m:
            sums[k, i] -= errors[base + (n - m) % capacity]
    errors[base + n % capacity] = error
    events[base + n % capacity] = event
    n += 1
    count[k] = n
    rejected = False
    for i in range(lengths.shape[0]):
        m = lengths[i]
        if n >= m and sums[k, i] * sums[k, i] > m * bound:
            rejected = True
            break
    if not rejected:
        return -1
    kept = min(n, capacity)
    first = n - kept
    total = 0.0
    for j in range(kept):
        total += errors[base + (first + j) % capacity]
    best, split, running = -1.0, 1, 0.0
    for j in range(1, kept):  # the older part: the first j errors
        running += errors[base + (first + j - 1) % capacity]
        gap = running - j * total / kept
        stat = gap * gap / (j * (kept - j))
        if stat > best:
            best, split = stat, j
    return events[base + (first + split) % capacity]


class ActionChanges:
    """What a policy that keeps events knows of its actions' changes: the monitor, and per
    action the first event its models may learn from (``since``) and the event count when its
    change was found (``cut_at``: its errors are watched again once the models in use were
    fitted after it)."""

    def __init__(self, monitor: ResidualMonitor):
        self.monitor = monitor
        self.since = np.zeros(0, np.int64)
        self.cut_at = np.zeros(0, np.int64)
        self.changes = 0
        self.refit_now = False  # a change was found since the last refit started

    @classmethod
    def start(cls, delta: float | None) -> ActionChanges | None:
        return None if delta is None else cls(ResidualMonitor(0, delta))

    def grow(self, n_actions: int) -> None:
        extra = n_actions - len(self.since)
        if extra > 0:
            self.since = np.concatenate([self.since, np.zeros(extra, np.int64)])
            self.cut_at = np.concatenate([self.cut_at, np.zeros(extra, np.int64)])
            self.monitor.resize(n_actions)

    def select(self, keep: np.ndarray) -> None:
        """Keep the actions ``keep`` only (ascending), renumbered 0, 1, ... in that order."""
        mine = keep[keep < len(self.since)]
        self.since, self.cut_at = self.since[mine], self.cut_at[mine]
        self.monitor.select(keep)

    def kept(self, actions: np.ndarray, n_events: int) -> np.ndarray | None:
        """Which of the window's last ``len(actions)`` events (of ``n_events``, oldest first)
        their action's models may learn from; None: all of them."""
        if not self.since.any():
            return None
        events = n_events - len(actions) + np.arange(len(actions))
        return events >= _per_event(self.since, actions)

    def predates(self, k: int, fitted_events: int) -> bool:
        """Whether models fitted on the first ``fitted_events`` events predate action ``k``'s
        last change found: its errors are not tested against them, and the predictions they
        make of its events are not kept (they say how the old models fit the new rewards)."""
        return k < len(self.cut_at) and self.cut_at[k] > fitted_events

    def stale(self, actions: np.ndarray, events: np.ndarray) -> np.ndarray:
        """Which of these events (their actions and event numbers) came before their action's
        change was found: their held-out predictions were the old models'. (Those learned
        after it, while the models in use still predated it, were not kept: :meth:`predates`.)

        >>> changes = ActionChanges(ResidualMonitor(2, 0.01))
        >>> changes.grow(2)
        >>> changes.since[0], changes.cut_at[0] = 100, 150  # action 0 changed at 100, found at 150
        >>> changes.stale(np.array([0, 0, 1]), np.array([120, 160, 120])).tolist()
        [True, False, False]
        """
        return events < _per_event(self.cut_at, actions)

    def to_state(self) -> dict:
        """The monitor and the cuts (the count of changes is the policy's to keep: a serving
        copy, without this state, shows it too)."""
        return {"monitor": self.monitor.to_state(), "since": self.since.copy(),
                "cut_at": self.cut_at.copy(), "refit_now": self.refit_now}

    @classmethod
    def from_state(cls, state: dict) -> ActionChanges:
        """(``changes``, the count, is the policy's to set: see :meth:`to_state`.)"""
        changes = cls(ResidualMonitor.from_state(state["monitor"]))
        changes.since = np.asarray(state["since"], np.int64).copy()
        changes.cut_at = np.asarray(state["cut_at"], np.int64).copy()
        changes.refit_now = bool(state["refit_now"])
        return changes


def _per_event(values: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Each event's action's entry of the per-action ``values`` (0 past their end: an action
    newer than them)."""
    out = np.zeros(int(actions.max(initial=-1)) + 1, np.int64)
    n = min(len(out), len(values))
    out[:n] = values[:n]
    return out[actions]
