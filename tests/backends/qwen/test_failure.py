"""Why a Qwen Code run failed, from its `[API Error: …]` messages (Qwen Code 0.24.4)."""

from __future__ import annotations

import pytest

from backends.claude.failure import AUTH, CAPACITY, CONTEXT, MODEL, NETWORK, QUOTA, SERVER
from backends.qwen.failure import failure_reason


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("[API Error: 401 Incorrect API key provided]", AUTH),
        ("[API Error: 404 The model `fake-chat` does not exist]", MODEL),
        ("[API Error: 429 Rate limit reached for requests]Possible quota limitations…", CAPACITY),
        ("[API Error: 429 You exceeded your current quota, please check your plan]", QUOTA),
        ("[API Error: 400 This model's maximum context length is 8192 tokens.]", CONTEXT),
        ("[API Error: 500 fake server scripted error]", SERVER),
        ("[API Error: Connection error.]", NETWORK),
        ("Qwen OAuth quota exceeded: try tomorrow", QUOTA),
        ("[API Error: 400 tool schema invalid]", ""),
        ("Max session turns exceeded", ""),
    ],
)
def test_each_error_names_its_reason(message: str, reason: str) -> None:
    """The bracket is read through; the words, then the status, name the reason."""
    assert failure_reason(message) == reason
