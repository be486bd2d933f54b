"""Why a Copilot run failed: its `session.error` and the last failed model call before it."""

from __future__ import annotations

import pytest

from backends.claude.failure import AUTH, CAPACITY, CONTEXT, MODEL, NETWORK, QUOTA, SERVER
from backends.copilot.failure import failure_reason

CASES = [
    ({"errorType": "query", "message": "x", "statusCode": 401}, None, AUTH),
    ({"errorType": "query", "message": "x", "statusCode": 403}, None, AUTH),
    ({"errorType": "query", "message": "x", "statusCode": 404}, None, MODEL),
    ({"errorType": "query", "message": "Too many requests", "statusCode": 429}, None, CAPACITY),
    ({"errorType": "query", "message": "insufficient_quota", "statusCode": 429}, None, QUOTA),
    ({"errorType": "query", "message": "Failed to get response", "statusCode": 503}, None, SERVER),
    ({"errorType": "rate_limit", "message": "Rate limit exceeded"}, None, CAPACITY),
    ({"errorType": "quota", "message": "Monthly limit reached"}, None, QUOTA),
    ({"errorType": "authentication", "message": "Not signed in"}, None, AUTH),
    ({"errorType": "query", "message": "400 maximum context length is 8192"}, None, CONTEXT),
    ({"errorType": "query", "message": "Request failed"}, {"failureKind": "transport"}, NETWORK),
    (
        {"errorType": "query", "message": "Request failed"},
        {"statusCode": 529, "errorMessage": "overloaded"},
        CAPACITY,
    ),
    ({"errorType": "query", "message": "Something else went wrong"}, None, ""),
]


@pytest.mark.parametrize(("error", "call", "reason"), CASES)
def test_each_failure_is_named(
    error: dict[str, object], call: dict[str, object] | None, reason: str
) -> None:
    """The status decides first, then the error type, then the words; else no reason."""
    assert failure_reason(error, call) == reason
