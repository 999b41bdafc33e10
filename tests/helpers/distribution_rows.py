"""The check every policy's ``distribution_rows`` owes its evaluator (``AutoPolicy``)."""

from __future__ import annotations

import numpy as np


def assert_rows_are_probabilities(policy, xs: list[dict], actions: list) -> np.ndarray:
    """``policy.distribution_rows(xs)`` gives the inventory ``actions`` and, row by row, number
    for number, what ``probabilities(x)`` gives; no contexts give no rows. So does it over a
    request's own actions (some of the inventory in another order, and one never seen).
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
    return rows
