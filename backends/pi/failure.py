"""Why a Pi run failed, from the error message of its last turn.

Pi reports a provider failure as the turn's `errorMessage` (and again as `auto_retry_end`'s
`finalError` once its own retries are spent). For the OpenAI-compatible providers that message
is the SDK's: the HTTP status, then the API's message. Observed with Pi 0.73.1:

    429 rate limit          "429 Rate limit reached for requests"
    429 insufficient_quota  "429 You exceeded your current quota, please check your plan …"
    401                     "401 Incorrect API key provided"
    404                     "404 The model `fake-chat` does not exist"
    5xx                     "500 fake server scripted error"
    no answer               "Connection error." / "Request timed out."
    context window          "400 This model's maximum context length is 8192 tokens. …"

Pi's own refusals come before any request: "No API key found for …", "Model "x" not found".
A message none of these cover returns "" and the daemon falls back to Multica's text rules.
"""

from __future__ import annotations

import re

from backends.claude.failure import AUTH, CAPACITY, CONTEXT, MODEL, NETWORK, QUOTA, SERVER

_STATUS = re.compile(r"^(\d{3})\b")
_BY_STATUS = {401: AUTH, 402: QUOTA, 403: AUTH, 404: MODEL, 429: CAPACITY, 529: CAPACITY}
# Checked in order, before the status: a quota or a full context also comes as a 429 or a 400.
_BY_SENTENCE = (
    ("exceeded your current quota", QUOTA),
    ("insufficient_quota", QUOTA),
    ("maximum context length", CONTEXT),
    ("exceeds the context window", CONTEXT),
    ("context_length_exceeded", CONTEXT),
    ("context length exceeded", CONTEXT),
    ("no api key found", AUTH),
    ("no api key for", AUTH),
    ("unknown provider", MODEL),
    ("not found. use --list-models", MODEL),
    ("connection error", NETWORK),
    ("request timed out", NETWORK),
    ("fetch failed", NETWORK),
    ("econnrefused", NETWORK),
    ("econnreset", NETWORK),
)


def failure_reason(message: str) -> str:
    """The taxonomy reason a Pi error message stands for, or "" when it is none it knows."""
    text = message.strip().lower()
    for sentence, reason in _BY_SENTENCE:
        if sentence in text:
            return reason
    found = _STATUS.match(text)
    if found is None:
        return ""
    status = int(found.group(1))
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return SERVER if 500 <= status <= 599 else ""
