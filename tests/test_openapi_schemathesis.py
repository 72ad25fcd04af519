"""The OpenAPI schema holds: schemathesis generates requests for every route from /openapi.json and checks that
none gets a 5xx and every answer matches the schema (a bounded number of examples per route)."""
from __future__ import annotations

import pytest
import schemathesis
from conftest import demo_and_trading_logs
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from reasonlog.server.app import create_app
from reasonlog.store import open_store

EXAMPLES = 25  # per route: the whole test stays under a minute


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    db = tmp_path_factory.mktemp("openapi") / "t.db"
    demo_and_trading_logs(db)
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(lambda: open_store(db)))


def operations():
    """Every route of the schema, by its label (`GET /v1/sessions`), as pytest parameters."""
    app = create_app(lambda: open_store(":memory:"))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    return sorted(result.ok().label for result in schema.get_all_operations())


@pytest.mark.parametrize("label", [label if label == "GET /v1/sessions" else pytest.param(label, marks=pytest.mark.slow)
                                   for label in operations()])
def test_no_route_answers_5xx_or_outside_its_schema(api, label):
    (operation,) = [r.ok() for r in api.get_all_operations() if r.ok().label == label]

    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case):
        # Every check but "a request the schema allows is accepted": the schema cannot say all the server
        # knows (a date must be a real date, a cursor one it gave out), and saying it is a 400 naming it.
        case.call_and_validate(excluded_checks=[positive_data_acceptance])

    check()
