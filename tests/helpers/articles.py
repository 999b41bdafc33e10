"""Days of new articles with their topic, for the tests of actions that bring their own
features: a user reads the article of the topic she likes."""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.helpers.factories import drain

TOPICS = ["sport", "politics", "science", "music", "travel"]


def articles(day: int) -> dict[str, dict]:
    """The day's five articles: id -> features (one per topic)."""
    return {f"d{day}-{t}": {"topic": t, "words": 3 + i} for i, t in enumerate(TOPICS)}


def article_days(step: Callable[[int, int, str], float], trainer, days: range,
                 per_day: int = 100, first: int = 20) -> list[float]:
    """``step(day, i, likes)`` decides among ``articles(day)`` for a user who likes that topic,
    reports the reward and returns it; ``per_day`` rounds a day, the trainer drained every 50.
    Returns the rewards of each day's ``first`` rounds (its articles are new then)."""
    rng = random.Random(days.start)
    earned = []
    for day in days:
        for i in range(per_day):
            reward = step(day, i, rng.choice(TOPICS))
            if i < first:
                earned.append(reward)
            if i % 50 == 49:
                drain(trainer)
    return earned
