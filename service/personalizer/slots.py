"""Multi-slot events: Personalizer's slots mapped onto one Grove decision per slot.

Personalizer's multi-slot Rank chose one action for each slot of a page, never the same action
twice, from one action list; each slot had an id, optional features, optional excluded actions
and a ``baselineAction`` (the action the application would show there without Personalizer,
used as the baseline of offline evaluations). Rewards came per slot.

How Grove does it (the choices are here):

- **A slot is a decision.** Slot ``i`` is decided with the event's context joined with the slot's
  own features under the namespace ``slot`` (``slot.size = "large"``) and the slot's id as the
  feature ``slot.id``, so the policy can learn both what each slot's features and what each slot
  (its position on the page) favour. Rewards are learned per slot, as the reward of that slot's
  decision.
- **Slots are filled in the order given**, each among the actions not excluded for it and not
  chosen for an earlier slot (Personalizer's order: the first slot is the most valuable). The
  probability logged for a slot is the policy's probability of its action among the actions still
  open for that slot (the propensity of that decision, which is what off-policy estimators use).
- **Each slot's decision has its own eventId** ``<eventId>#<slot>`` (``#`` cannot occur in a
  client's eventId, so these never collide with single-slot events; a slot id outside
  ``[A-Za-z0-9_.:-]`` is replaced by ``~`` and a digest of it). Multi-slot rewards and activation
  address these; all slots of an event are recorded all or none.
- **Checks are Personalizer's**: at least one slot and no more slots than actions, unique
  non-empty slot ids, every baseline an action of the request, baselines unique and never
  excluded for their slot, excluded ids must be actions of the request.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.api.personalizer_map import flatten

_SAFE_SLOT = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
#: a multi-slot event's own eventId: room left for the '#<slot>' suffix of each slot's decision
#: within Grove's 128 characters
MULTI_SLOT_EVENT_ID = r"^[A-Za-z0-9_.:-]{1,100}$"
SEPARATOR = "#"
SLOT_NAMESPACE = "slot"


class SlotError(ValueError):
    """A multi-slot request Personalizer would have refused (the API answers 400)."""


@dataclass(frozen=True)
class Slot:
    id: str
    baseline: str
    features: list[dict[str, Any]] | None = None
    excluded: tuple[str, ...] = ()


def slot_event_id(event_id: str, slot_id: str) -> str:
    """The eventId of one slot's decision.

    >>> slot_event_id("e1", "Main")
    'e1#Main'
    >>> slot_event_id("e1", "Side Bar")
    'e1#~01296a393c3a54ce'
    """
    if _SAFE_SLOT.match(slot_id):
        return f"{event_id}{SEPARATOR}{slot_id}"
    digest = hashlib.sha256(slot_id.encode()).hexdigest()[:16]
    return f"{event_id}{SEPARATOR}~{digest}"


def split_event_id(event_id: str) -> tuple[str, str | None]:
    """``(eventId, slot part)`` of a logged eventId (slot part None for single-slot events)."""
    base, sep, slot = event_id.partition(SEPARATOR)
    return base, (slot if sep else None)


def slot_context(context: Mapping[str, Any], slot: Slot) -> dict[str, Any]:
    """The context a slot's decision sees: the event's, plus ``slot.id`` and ``slot.<feature>``.

    >>> slot_context({"user.tier": "pro"}, Slot("Main", "a", [{"size": "large"}]))
    {'user.tier': 'pro', 'slot.id': 'Main', 'slot.size': 'large'}
    >>> slot_context({"slot.size": "small"}, Slot("Main", "a", [{"size": "large"}]))
    Traceback (most recent call last):
    service.personalizer.slots.SlotError: feature 'slot.size' is given twice ...
    """
    joined = dict(context)
    own = {f"{SLOT_NAMESPACE}.{name}": value for name, value in flatten(slot.features).items()}
    for name, value in {f"{SLOT_NAMESPACE}.id": slot.id, **own}.items():
        if joined.get(name, value) != value:  # (the context's own 'slot' namespace)
            raise SlotError(f"feature {name!r} is given twice with different values (the "
                            f"context's and slot {slot.id!r}'s)")
        joined[name] = value
    return joined


def check_slots(slots: Sequence[Slot], action_ids: Sequence[str]) -> None:
    """Personalizer's multi-slot rules; :class:`SlotError` saying which one is broken."""
    if not slots:
        raise SlotError("at least one slot must be defined in a multi-slot rank request")
    if len(slots) > len(action_ids):
        raise SlotError(
            f"{len(slots)} slots for {len(action_ids)} actions: slots count should be between 1 "
            "and the number of actions"
        )
    ids = [s.id for s in slots]
    if any(not i for i in ids) or len(set(ids)) != len(ids):
        raise SlotError("every slot must have a unique, non-empty id")
    known = set(action_ids)
    baselines = [s.baseline for s in slots]
    for slot in slots:
        if slot.baseline not in known:
            raise SlotError(
                f"slot {slot.id!r}: baselineAction {slot.baseline!r} is not one of the actions"
            )
        unknown = sorted(set(slot.excluded) - known)
        if unknown:
            raise SlotError(f"slot {slot.id!r}: excludedActions {unknown} are not actions")
        if slot.baseline in slot.excluded:
            raise SlotError(
                f"slot {slot.id!r}: baselineAction {slot.baseline!r} cannot be excluded"
            )
    if len(set(baselines)) != len(baselines):
        raise SlotError("each slot must have a unique baselineAction")


def reserved_for_later(later: Sequence[set]) -> set:
    """The actions every assignment of distinct actions to the ``later`` slots (each slot: the
    set it may take) uses: a slot decided before them must not take one, or some later slot is
    left with none. Empty when no assignment exists at all (the request then fails on its own).

    Multi-slot rank decides its slots in order, each excluding the earlier slots' actions; a
    draw that took the one action a later slot could take made a feasible request a 400 (9 of 20
    times for two slots over three actions). One maximum matching of the later slots (augmenting
    paths), then for each matched action whether its slot can be matched around it.

    >>> sorted(reserved_for_later([{"a1"}]))
    ['a1']
    >>> sorted(reserved_for_later([{"a1", "a2"}, {"a2"}]))
    ['a1', 'a2']
    >>> reserved_for_later([{"a1", "a2"}, {"a1", "a2", "a3"}])
    set()
    """
    slots = [sorted(allowed) for allowed in later]
    owner: dict = {}  # action -> the slot holding it

    def augment(j: int, seen: set, banned: object) -> bool:
        for a in slots[j]:
            if a in seen or a == banned:
                continue
            seen.add(a)
            if a not in owner or augment(owner[a], seen, banned):
                owner[a] = j
                return True
        return False

    if not all(augment(j, set(), None) for j in range(len(slots))):
        return set()
    reserved = set()
    for a in list(owner):
        j = owner.pop(a)
        if not augment(j, {a}, a):  # no matching without a: put it back
            owner[a] = j
            reserved.add(a)
    return reserved
