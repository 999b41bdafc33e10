"""An auto app through the API: evaluations, switches in /metrics, candidate changes (PATCH)."""

from __future__ import annotations

from .conftest import create


def test_evaluations_of_an_app_that_is_not_auto_is_a_422(client):
    shop = create(client)
    answer = client.get("/apps/shop/evaluations", headers=shop)
    assert answer.status_code == 422 and "'auto' apps" in answer.text
