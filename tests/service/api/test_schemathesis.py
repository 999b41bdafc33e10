"""Property-based run over the OpenAPI spec (schemathesis, in-process ASGI, the real Redis):
whatever the requests, the API never answers 5xx.

schemathesis is used as a library (the schema, one hypothesis strategy of requests per
operation), not through its pytest plugin: the plugin reaches into pytest's private attributes
and broke on a pytest upgrade (``'Function' object has no attribute '_nodeid'``); a strategy per
operation driven by hypothesis' own ``@given`` depends on public APIs only.
"""

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings

from service import keys
from service.api.main import create_app
from tests.helpers.factories import ADMIN, create, make_settings

#: examples per operation: about 25 operations, the whole file stays well under a minute
EXAMPLES = 12


@pytest.fixture
def api_schema(redis_url):
    app = create_app(make_settings(redis_url, max_body=64 * 1024, trainer_lease=3600))
    with TestClient(app) as client:  # runs the lifespan: Redis and the model cache are open
        create(client, "shop")
        # a trainer's heartbeat, so /readyz answers 200 (503 without trainer is by design)
        store = app.state.store
        seconds, micros = store.redis.time()
        store.redis.zadd(keys.TRAINERS, {"schemathesis": seconds * 1000 + micros // 1000})
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


def test_the_spec_has_operations(api_schema):
    operations = [result.ok() for result in api_schema.get_all_operations()]
    labels = {op.label for op in operations}
    assert len(operations) >= 20, labels  # a broken spec must not pass by testing nothing
    assert any(label.endswith("/decide") for label in labels), labels


def test_no_request_gets_a_5xx(api_schema):
    failures = []
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,  # the same examples on every run: a failure reproduces
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(case=operation.as_strategy())
        def run(case):
            # the admin key opens every route, so generated requests reach the handlers' checks
            response = case.call(headers={**ADMIN, **(case.headers or {})})
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path} -> {response.status_code}: "
                f"{response.text[:500]}"
            )

        try:
            run()
        except AssertionError as error:  # go on: one run reports every operation that fails
            failures.append(f"{operation.label}: {error}")
    assert not failures, "\n".join(failures)
