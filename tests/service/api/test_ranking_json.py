"""The decide answer's ranking JSON, written from a policy's arrays or from pairs: the same text
as ``json.dumps`` of the pairs, whatever the ties, ids and order."""

from __future__ import annotations

import json

import numpy as np
import pytest

from online.decision import Ranking
from service.api.usecases import _ranking_json


def _expected(pairs) -> str:
    return json.dumps([{"id": a, "probability": p} for a, p in pairs], separators=(",", ":"),
                      ensure_ascii=False)


@pytest.mark.parametrize("seed", range(20))
def test_from_arrays_and_from_pairs_both_write_what_json_dumps_writes(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    candidates = [f"ad{i}" for i in range(n - 1)] + ['qu"ote\\ \u00e9\u2028']
    # a policy's probabilities: a few distinct values (ties in runs), some zeros
    probs = rng.choice([0.0, 0.01, 0.25, 1 / 3], size=n)
    probs[int(rng.integers(n))] = 0.5
    order = np.argsort(-probs, kind="stable")
    ranking = Ranking(candidates, probs, order)
    assert json.loads(_ranking_json(ranking)) == json.loads(_expected(list(ranking)))
    assert _ranking_json(ranking) == _ranking_json(list(ranking)) == _expected(list(ranking))


def test_the_same_candidates_object_reuses_its_literals_and_a_changed_list_does_not():
    candidates = ["a", "b", "c"]
    probs = np.array([0.2, 0.7, 0.1])
    order = np.array([1, 0, 2])
    first = _ranking_json(Ranking(candidates, probs, order))
    candidates[0] = "z"  # a new inventory is a new list in the policies; even in place:
    second = _ranking_json(Ranking(list(candidates), probs, order))
    assert '"a"' in first and '"z"' in second and '"a"' not in second
