"""Why a Qwen Code run failed, from its `result` error.

Qwen Code wraps a provider's error as `[API Error: <message>]` (a 429 with advice after the
bracket); for OpenAI-compatible providers the message is the SDK's, read by
`backends.api_errors` (seen with Qwen Code 0.24.4: "[API Error: 401 Incorrect API key
provided]", "[API Error: 404 The model `fake-chat` does not exist]"). Its own Qwen OAuth
tier words its quota itself.
"""

from __future__ import annotations

from backends import api_errors
from backends.claude.failure import QUOTA

PREFIX = "[API Error: "
_QWEN_WORDS = (("qwen oauth quota exceeded", QUOTA), ("free tier has been discontinued", QUOTA))


def failure_reason(message: str) -> str:
    """The taxonomy reason a Qwen Code error stands for, or "" when it is none it knows."""
    text = message.strip()
    if text.startswith(PREFIX):
        text = text[len(PREFIX) :]
    return api_errors.failure_reason(text, _QWEN_WORDS)
