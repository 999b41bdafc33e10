"""When each action was offered: the actions a decision was drawn among, as the events say.

A Personalizer request names its actions (the day's articles, the products of a page), and the
event it logs carries them (the fifth item of a ``learn_many`` event; None: the decision was
drawn among the whole inventory). An action no request names any more is not removed from the
inventory (Personalizer has no inventory to remove it from), but no decision will read its
model either. :class:`OfferTimes` keeps, per action index, the first and last event that
offered it and how many did, from which :meth:`OfferTimes.stopped` tells the actions whose
offers have stopped: none for ``gaps`` times the mean gap between their offers.

Offers, not plays: how often an action is played depends on the policy (a poor action is
played at the exploration's rate), how often it is offered does not.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["OfferTimes", "SILENT_GAPS"]

#: an action whose offers came as a Poisson stream is silent for this many mean gaps with
#: probability e^-10 ~ 5e-5: so long a silence says its offers have stopped
SILENT_GAPS = 10


class OfferTimes:
    """Per action index: the first and last event (numbered from 1, as ``Policy`` counts its
    events) whose decision offered it by name, and how many did; the last event whose
    decision was drawn among the whole inventory, and the last event counted (``upto``).

    >>> offers = OfferTimes()
    >>> index = {"a": 0, "b": 1}
    >>> offers.note([("a", "b"), ("a",), ("a",), None, ("a",)], 0, index)
    >>> offers.first.tolist(), offers.last.tolist(), offers.count.tolist(), offers.inventory_at
    ([1, 1], [5, 1], [4, 1], 4)
    >>> offers.upto  # the last event counted
    5
    >>> offers.stopped(now=100, gaps=10).tolist()  # a: 4 offers in 5 events; b: one offer
    [True, False]
    >>> offers.note([["b", ["not", "an id"]], ("b", "c")], 100, index)  # (c: no index)
    >>> offers.count.tolist(), offers.last.tolist()
    ([4, 3], [5, 102])
    """

    def __init__(self, n: int = 0):
        self.first = np.full(n, -1, np.int64)
        self.last = np.full(n, -1, np.int64)
        self.count = np.zeros(n, np.int64)
        self.inventory_at = -1  # the last event drawn among the inventory (-1: none)
        self.upto = 0  # the last event counted

    def grow(self, n: int) -> None:
        """Room for ``n`` action indices (only grows)."""
        extra = n - len(self.count)
        if extra > 0:
            self.first = np.concatenate([self.first, np.full(extra, -1, np.int64)])
            self.last = np.concatenate([self.last, np.full(extra, -1, np.int64)])
            self.count = np.concatenate([self.count, np.zeros(extra, np.int64)])

    def note(self, offers: Iterable[Any], start: int, index: Mapping) -> None:
        """Count the ``offers`` of events ``start + 1``, ``start + 2``, ...: each a list of the
        action ids offered, or None (the inventory; anything else that is not a list of ids is
        taken as None). Ids without an index (never played, never added, or not an id at all)
        are not counted: the offers only tell which actions' trees a refit may skip.

        Each distinct offer of the call is looked up once (a catalogue sent whole with every
        request costs its hash, not a lookup per id per event)."""
        groups: dict = {}  # distinct offer -> [its ids' indices, first event, last, events]
        for t, offer in enumerate(offers, start + 1):
            self.upto = t
            if not isinstance(offer, (list, tuple)):
                self.inventory_at = t
                continue
            try:
                key = tuple(offer)
                group = groups.get(key)
            except TypeError:  # (an unhashable id: a group of its own)
                key, group = object(), None
            if group is None:
                groups[key] = [_indices(offer, index), t, t, 1]
            else:
                group[2] = t
                group[3] += 1
        groups = [g for g in groups.values() if g[0]]
        if not groups:
            return
        sizes = [len(g[0]) for g in groups]
        k_array = np.fromiter(itertools.chain.from_iterable(g[0] for g in groups), np.int64)
        first, last, events = (np.repeat(np.array([g[i] for g in groups], np.int64), sizes)
                               for i in (1, 2, 3))
        self.grow(int(k_array.max()) + 1)
        new = np.unique(k_array[self.count[k_array] == 0])
        self.first[new] = np.iinfo(np.int64).max
        np.minimum.at(self.first, k_array, first)
        np.maximum.at(self.last, k_array, last)
        np.add.at(self.count, k_array, events)

    def stopped(self, now: int, gaps: float = SILENT_GAPS) -> np.ndarray:
        """Per action index: offered by name at least twice, and not since for more than
        ``gaps`` times its mean gap between offers, nor drawn among the inventory since."""
        seen = self.count >= 2
        mean_gap = (self.last - self.first) / np.maximum(self.count - 1, 1)
        since = now - np.maximum(self.last, self.inventory_at)
        return seen & (since > gaps * mean_gap)

    def select(self, keep: np.ndarray) -> None:
        """Keep the action indices ``keep`` only (``keep[i]`` becomes index i)."""
        keep = keep[keep < len(self.count)]
        self.first, self.last, self.count = self.first[keep], self.last[keep], self.count[keep]

    def to_state(self) -> dict:
        return {"first": self.first.copy(), "last": self.last.copy(),
                "count": self.count.copy(), "inventory_at": self.inventory_at,
                "upto": self.upto}

    @classmethod
    def from_state(cls, state: Mapping | None) -> OfferTimes:
        """The offers of ``state`` (None: none known, as a state written before offers were
        kept: then no action's offers have stopped)."""
        offers = cls()
        if state is not None:
            offers.first = np.asarray(state["first"], np.int64).reshape(-1).copy()
            offers.last = np.asarray(state["last"], np.int64).reshape(-1).copy()
            offers.count = np.asarray(state["count"], np.int64).reshape(-1).copy()
            if not len(offers.first) == len(offers.last) == len(offers.count):
                raise ValueError("offers: first, last and count differ in length")
            offers.inventory_at = int(state["inventory_at"])
            offers.upto = int(state.get("upto", max(offers.inventory_at, 0,
                                                    int(offers.last.max(initial=0)))))
        return offers



def _indices(offer: Iterable[Any], index: Mapping) -> list[int]:
    """The indices of the ids of ``offer`` that have one (an unhashable id has none)."""
    try:
        return [k for k in map(index.get, offer) if k is not None]
    except TypeError:
        found = []
        for action in offer:
            try:
                k = index.get(action)
            except TypeError:
                continue
            if k is not None:
                found.append(k)
        return found
