"""Why a run failed, from a provider error as the OpenAI SDK words it: the HTTP status, then
the API's own message ("429 Rate limit reached for requests").

Pi and Qwen Code reach OpenAI-compatible APIs through that SDK and pass its message on (Qwen
Code inside `[API Error: …]`). The words come first — a quota or a full context window also
arrives as a 429 or a 400 — then the status:

    429 rate limit          "429 Rate limit reached for requests"          capacity
    429 insufficient_quota  "429 You exceeded your current quota, …"        quota
    401, 403                "401 Incorrect API key provided"               auth
    404                     "404 The model `x` does not exist"             model
    400 context             "400 This model's maximum context length is …" context
    5xx                     "500 …"                                        server
    no answer               "Connection error." / "Request timed out."     network

A message none of these cover returns "" and the daemon falls back to Multica's text rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from backends.claude.failure import CONTEXT, NETWORK, QUOTA, status_reason

_STATUS = re.compile(r"^(\d{3})\b")
WORDS = (
    ("exceeded your current quota", QUOTA),
    ("insufficient_quota", QUOTA),
    ("maximum context length", CONTEXT),
    ("exceeds the context window", CONTEXT),
    ("context_length_exceeded", CONTEXT),
    ("context length exceeded", CONTEXT),
    ("connection error", NETWORK),
    ("request timed out", NETWORK),
    ("fetch failed", NETWORK),
    ("econnrefused", NETWORK),
    ("econnreset", NETWORK),
)
"""The API's and the SDK's words that name a reason whatever the status."""


def failure_reason(message: str, words: Iterable[tuple[str, str]] = ()) -> str:
    """The taxonomy reason `message` stands for — by the CLI's own `words` first, then the
    SDK's, then the status it starts with — or "" when it is none of them."""
    text = message.strip().lower()
    for sentence, reason in (*words, *WORDS):
        if sentence in text:
            return reason
    found = _STATUS.match(text)
    if found is None:
        return ""
    return status_reason(int(found.group(1)))
