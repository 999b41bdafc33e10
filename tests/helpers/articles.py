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
                 per_day: int = 100, first: int = 20,
                 drained: Callable[[], None] | None = None) -> list[float]:
    """``step(day, i, likes)`` decides among ``articles(day)`` for a user who likes that topic,
    reports the reward and returns it; ``per_day`` rounds a day, the trainer drained every 50
    (then ``drained()``, if given: see :func:`serve_latest`). Returns the rewards of each day's
    ``first`` rounds (its articles are new then)."""
    rng = random.Random(days.start)
    earned = []
    for day in days:
        for i in range(per_day):
            reward = step(day, i, rng.choice(TOPICS))
            if i < first:
                earned.append(reward)
            if i % 50 == 49:
                drain(trainer)
                if drained is not None:
                    drained()
    return earned


def serve_latest(api, store, app: str) -> None:
    """Make the API ``api`` (a FastAPI app of ``create_app``) serve ``app``'s newest snapshot
    now, as its next decide would after a background load. With ``decide_seed`` in the
    settings, a test's draws then no longer depend on when that load ends.

    Why a test wants that: SquareCB's exploration can starve an action the model is wrong
    about. On these days, with one in five users per topic, ``adf`` never played one topic to
    its readers in about 1 run in 100 of OS-seeded draws (0.78 instead of 0.96 on new
    articles), and the native and Personalizer tests that assert >= 0.8 failed that often."""
    api.state.models.get(store, store.require_app(app), store.snapshot_info(app).version)
