"""Synthetic decide/reward traffic for tests that need an app with logged events."""

from __future__ import annotations

import numpy as np


def feed(http, name: str, key: dict, n: int, seed: int) -> None:
    """n decide + reward events over HTTP: action 'a' pays when x == 1, 'b' when x == 0."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        context = {"x": int(rng.integers(0, 2)), "color": str(rng.choice(["red", "blue"]))}
        decided = http.post(f"/apps/{name}/decide", json={"context": context}, headers=key)
        assert decided.status_code == 200, decided.text
        decided = decided.json()
        good = "a" if context["x"] == 1 else "b"
        reward = float(rng.random() < (0.9 if decided["action"] == good else 0.1))
        body = {"eventId": decided["eventId"], "reward": reward}
        assert http.post(f"/apps/{name}/reward", json=body, headers=key).status_code == 200
