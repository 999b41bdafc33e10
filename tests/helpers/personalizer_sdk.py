"""Apps for the Personalizer SDK tests (the SDK fixtures are in tests/service/personalizer/
conftest.py)."""

from __future__ import annotations

from .factories import ADMIN


def make_app(server: str, name: str = "news", **overrides) -> str:
    """An app created with only a name (and ``overrides``) through Grove's API; its key."""
    import httpx

    body = {"name": name, **overrides}
    answer = httpx.post(server + "/apps", json=body, headers=ADMIN, timeout=120)
    assert answer.status_code == 201, answer.text
    return answer.json()["apiKey"]
