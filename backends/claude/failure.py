"""Why a Claude Code run failed, from the CLI's structured fields rather than its prose.

After an API error the CLI prints a synthetic assistant line (`is_api_error_message`) whose
`error` names the kind (`rate_limit`, `billing_error`, `authentication_failed`,
`model_not_found`, `server_error`, `invalid_request`), then a `result` line with
`terminal_reason` (`prompt_too_long`, `api_error`, …); both carry the HTTP `api_error_status`
and the API's `api_error_type`. Observed with Claude Code 2.1.328:

    429 rate_limit_error        error=rate_limit              "Request rejected (429) · …"
    400 prompt is too long      terminal_reason=prompt_too_long, error=invalid_request
    400 credit balance          error=billing_error           "Credit balance is too low"
    401 authentication_error    error=authentication_failed   "Invalid API key · …"
    404 not_found_error         error=model_not_found         "… you may not have access to it …"
    529 overloaded_error        error=server_error
    connection reset            error=server_error, no status "Connection to the API was lost"

The prose misleads Multica's text classifier ("30,000 input tokens per minute" reads as a
context overflow, "you may not have access" as an auth error); these fields do not. What they
leave open returns "" and the daemon falls back to the text rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Multica's failure taxonomy (Go `taskfailure`); the daemon checks these against its list.
CAPACITY = "agent_error.provider_capacity_or_rate_limit"
QUOTA = "agent_error.provider_quota_limit"
AUTH = "agent_error.provider_auth_or_access"
MODEL = "agent_error.model_not_found_or_unavailable"
CONTEXT = "agent_error.context_overflow"
NETWORK = "agent_error.provider_network"
SERVER = "agent_error.provider_server_error"
INVALID_REQUEST = "api_invalid_request"

_BY_KIND = {
    "rate_limit": CAPACITY,
    "billing_error": QUOTA,
    "authentication_failed": AUTH,
    "model_not_found": MODEL,
    "invalid_request": INVALID_REQUEST,
}
_BY_TYPE = {
    "rate_limit_error": CAPACITY,
    "overloaded_error": CAPACITY,
    "authentication_error": AUTH,
    "permission_error": AUTH,
    "not_found_error": MODEL,
    "api_error": SERVER,
}
BY_STATUS = {401: AUTH, 402: QUOTA, 403: AUTH, 404: MODEL, 429: CAPACITY, 529: CAPACITY}
"""The reason an HTTP status stands for, whichever CLI reports it."""


def status_reason(status: int, by_status: Mapping[int, str] = BY_STATUS) -> str:
    """The taxonomy reason an HTTP status stands for: its entry in `by_status`, else a
    server error for any 5xx, else ""."""
    if status in by_status:
        return by_status[status]
    return SERVER if 500 <= status <= 599 else ""


def failure_reason(result: Mapping[str, Any], api_error: Mapping[str, Any] | None) -> str:
    """The taxonomy reason the `result` line and the last API-error assistant line give, or
    "" when they do not decide it."""
    if result.get("terminal_reason") == "prompt_too_long":
        return CONTEXT
    fields = {**(api_error or {}), **{k: v for k, v in result.items() if v is not None}}
    status = fields.get("api_error_status")
    status = status if isinstance(status, int) else None
    kind = (api_error or {}).get("error")
    api_type = fields.get("api_error_type")
    # Capacity first: the CLI files a 529 under `server_error`, Multica under capacity.
    if status in (429, 529) or kind == "rate_limit":
        return CAPACITY
    if kind in _BY_KIND:
        return _BY_KIND[kind]
    if kind == "server_error" and status is None:
        # No HTTP status at all: the request never got an answer (reset, refused, timed out).
        return NETWORK
    if isinstance(api_type, str) and api_type in _BY_TYPE:
        return _BY_TYPE[api_type]
    if status in BY_STATUS:
        return BY_STATUS[status]
    if (status is not None and 500 <= status <= 599) or kind == "server_error":
        return SERVER
    return ""
