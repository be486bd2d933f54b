"""Why a Pi run failed, from the error message of its last turn.

Pi reports a provider failure as the turn's `errorMessage` (and again as `auto_retry_end`'s
`finalError` once its own retries are spent): for OpenAI-compatible providers the SDK's
message, read by `backends.api_errors` (seen with Pi 0.73.1: "429 Rate limit reached for
requests", "401 Incorrect API key provided", "500 …"). Pi's own refusals come before any
request: "No API key found for …", "Model "x" not found".
"""

from __future__ import annotations

from backends import api_errors
from backends.claude.failure import AUTH, MODEL

_PI_WORDS = (
    ("no api key found", AUTH),
    ("no api key for", AUTH),
    ("unknown provider", MODEL),
    ("not found. use --list-models", MODEL),
)


def failure_reason(message: str) -> str:
    """The taxonomy reason a Pi error message stands for, or "" when it is none it knows."""
    return api_errors.failure_reason(message, _PI_WORDS)
