"""The check every policy's ``distribution_rows`` owes its evaluator (``AutoPolicy``)."""

from __future__ import annotations

import numpy as np


def assert_rows_are_probabilities(policy, xs: list[dict], actions: list) -> np.ndarray:
    """``policy.distribution_rows(xs)`` gives the inventory ``actions`` and, row by row, number
    for number, what ``probabilities(x)`` gives; no contexts give no rows. So does it over a
    request's own actions (some of the inventory in another order, and one never seen), and
    ``offered_rows`` with each row's own (where the policy has it).
    Returns the inventory's rows."""
    got, rows = policy.distribution_rows(xs)
    assert got == actions and rows.shape == (len(xs), len(actions))
    for x, row in zip(xs, rows):
        assert dict(zip(actions, row.tolist())) == policy.probabilities(x)
    assert policy.distribution_rows([])[1].shape == (0, len(actions))
    offered = [actions[-1], "never-seen", actions[0]]
    got, offered_rows = policy.distribution_rows(xs, offered)
    assert got == offered and offered_rows.shape == (len(xs), 3)
    for x, row in zip(xs, offered_rows):
        assert dict(zip(offered, row.tolist())) == policy.probabilities(x, offered)
    if hasattr(policy, "offered_rows"):  # each row over its own request's actions
        offers = [tuple(actions[i % len(actions):][:3]) or (actions[0],) for i in range(len(xs))]
        offers[0] = (actions[-1], "never-seen", actions[0], actions[-1])  # (a repeat)
        got = policy.offered_rows(xs, offers)
        assert len(got) == len(xs) and policy.offered_rows([], []) == []
        for x, offer, row in zip(xs, offers, got):
            offer = tuple(dict.fromkeys(offer))
            assert dict(zip(offer, row.tolist())) == policy.probabilities(x, offer), offer
    return rows
