"""Why a Copilot run failed, from its `session.error` event and the last failed model call.

The CLI retries a failed model call itself (an `assistant.turn_retry` per attempt, with a
`reason`: `rate_limit`, `transient_auth_error`, …), then gives up with one `session.error`
whose `errorType` and `statusCode` say what happened. Observed with Copilot CLI 1.0.102
against an OpenAI-compatible provider:

    401                 errorType=authentication  "Authentication failed with provider … (HTTP 401)"
    429 (after retries) errorType=rate_limit      "Failed to get response …; Last error: 429 …"
    400 context length  errorType=query           "400 This model's maximum context length is …"
    404                 errorType=query           "Model 'm' not found on provider at … (HTTP 404)"
    500 (after retries) errorType=query           "Failed to get response from the AI model; …"
    no connection       errorType=query, no status "Could not connect to local model provider …"
                        (each failed call before it: `model.call_failure`, failureKind=transport)

The status decides first (it is the provider's own word), then the error type, then the
message for what neither names (a full context, a provider that could not be reached). What
they leave open returns "" and the daemon falls back to Multica's text rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The names of Claude's reasons, the taxonomy every backend maps its own words to.
from backends.claude.failure import (
    AUTH,
    BY_STATUS,
    CAPACITY,
    CONTEXT,
    MODEL,
    NETWORK,
    QUOTA,
    SERVER,
)
from backends.json_lines import int_field, str_field

_BY_TYPE = {
    "authentication": AUTH,
    "authorization": AUTH,
    "rate_limit": CAPACITY,
    "quota": QUOTA,
    "model_not_found": MODEL,
    "context_limit": CONTEXT,
}
_CONTEXT = ("maximum context length", "context_length_exceeded", "prompt is too long")
_NETWORK = (
    "could not connect",
    "econnrefused",
    "econnreset",
    "etimedout",
    "enotfound",
    "fetch failed",
    "socket hang",
)
_QUOTA = ("quota", "insufficient_quota", "billing")


def failure_reason(error: Mapping[str, Any], call: Mapping[str, Any] | None = None) -> str:
    """The taxonomy reason a `session.error` (and the last `model.call_failure` before it)
    stand for, or "" when they do not decide it."""
    text = (str_field(error.get("message")) + " " + _call_text(call)).lower()
    if any(words in text for words in _CONTEXT):
        return CONTEXT
    status = int_field(error.get("statusCode")) or int_field((call or {}).get("statusCode"))
    if status == 429 and any(words in text for words in _QUOTA):
        return QUOTA
    if status in BY_STATUS:
        return BY_STATUS[status]
    kind = str_field(error.get("errorType"))
    if kind in _BY_TYPE:
        return _BY_TYPE[kind]
    if 500 <= status <= 599:
        return SERVER
    transport = str_field((call or {}).get("failureKind")) == "transport"
    if not status and (transport or any(words in text for words in _NETWORK)):
        return NETWORK
    return ""


def _call_text(call: Mapping[str, Any] | None) -> str:
    return str_field((call or {}).get("errorMessage"))
