"""Why a Codex run failed, from its `turn.failed` and `error` events.

`codex exec --json` reports an API failure as a fixed sentence per error kind, not as the
API's body, so each sentence stands for one of the CLI's own error codes (Codex 0.169.0):

    429 rate_limit_exceeded     "exceeded retry limit, last status: 429 Too Many Requests"
    429 insufficient_quota      "Quota exceeded. Check your plan and billing details."
    429 usage_limit_reached     "You've hit your usage limit. … try again at 2:05 PM."
    5xx                         "We're currently experiencing high demand, …"
                                or "… last status: 5xx …" / "unexpected status 5xx …"
    model at capacity           "Selected model is at capacity. Please try a different model."
    stream cut                  "stream disconnected before completion: …"
    context window              "Codex ran out of room in the model's context window. …"

A sentence none of these cover returns "" and the daemon falls back to Multica's text rules.
"""

from __future__ import annotations

import re

# The names of Claude's reasons, the taxonomy every backend maps its own words to.
from backends.claude.failure import (
    AUTH,
    CAPACITY,
    CONTEXT,
    MODEL,
    NETWORK,
    QUOTA,
    SERVER,
    status_reason,
)

_STATUS = re.compile(r"(?:last status:|unexpected status) (\d{3})\b")
_RESETS = re.compile(r"try again at (.+?)\.?\s*$")
_BY_STATUS = {401: AUTH, 402: QUOTA, 403: AUTH, 404: MODEL, 429: CAPACITY}
_BY_SENTENCE = (
    ("hit your usage limit", QUOTA),
    ("quota exceeded. check your plan and billing details", QUOTA),
    ("ran out of room in the model's context window", CONTEXT),
    ("selected model is at capacity", CAPACITY),
    ("stream disconnected before completion", NETWORK),
    ("currently experiencing high demand", SERVER),
)


def failure_reason(message: str) -> str:
    """The taxonomy reason a Codex error sentence stands for, or "" when it is not one of the
    CLI's known sentences."""
    text = message.lower().replace("\u2019", "'")
    for sentence, reason in _BY_SENTENCE:
        if sentence in text:
            return reason
    found = _STATUS.search(text)
    if found is None:
        return ""
    return status_reason(int(found.group(1)), _BY_STATUS)


def limit_resets(message: str) -> str:
    """When the limit lifts, as the CLI words it ("2:05 PM"), or "" when it does not say."""
    found = _RESETS.search(message.strip())
    return found.group(1).strip() if found else ""
