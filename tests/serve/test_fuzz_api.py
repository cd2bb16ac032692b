"""`vpub serve`'s HTTP API fuzzed with schemathesis against its own OpenAPI document, on
a live uvicorn server on loopback (the StatDB tests' store and its release directory,
no token: loopback needs none). Every operation is called with generated bodies and
paths (derandomized); the property: no 5xx, every response conforms to the document
(status, content type, schema), and every 4xx is a JSON error naming what went wrong
and the field at fault (or null). A schema-valid request may still be refused (422): a
label the store does not have or a condition that does not parse is beyond what a
schema says, so schemathesis' "positive data accepted" check is left out."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance
from serve_helpers import running

from vpub_spark.serve.app import ENDPOINTS, ServeSettings


@pytest.fixture(scope="module")
def api(store):
    served = ServeSettings(str(store[0]), str(store[1].parent), None, max_body=2048, rate=0)
    with running(served) as url:
        yield schemathesis.openapi.from_url(f"{url}/openapi.json")


def test_every_operation_answers_by_its_document(api):
    """Each operation's generated cases in turn (schemathesis' strategies under
    Hypothesis directly: its pytest plugin does not load under this pytest)."""
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) == len(ENDPOINTS)  # every operation
    for operation in operations:
        _fuzz(operation)


def _fuzz(operation) -> None:
    @given(case=operation.as_strategy())
    @settings(
        max_examples=150, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
    )
    def check(case):
        response = case.call()
        case.validate_response(response, excluded_checks=[positive_data_acceptance])
        assert response.status_code < 500, (case.path, case.body, response.text)
        if 400 <= response.status_code < 500:
            body = response.json()
            assert set(body) == {"error", "field"} and body["error"], body

    check()
