"""Why a Pi run failed, from its error messages (as Pi 0.73.1 words them)."""

from __future__ import annotations

import pytest

from backends.claude.failure import AUTH, CAPACITY, CONTEXT, MODEL, NETWORK, QUOTA, SERVER
from backends.pi.failure import failure_reason


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("429 Rate limit reached for requests", CAPACITY),
        ("429 You exceeded your current quota, please check your plan and billing details.", QUOTA),
        ("402 Payment required", QUOTA),
        ("401 Incorrect API key provided", AUTH),
        ("403 Forbidden", AUTH),
        ('No API key found for "fake"', AUTH),
        ("404 The model `fake-chat` does not exist", MODEL),
        ('Model "nope" not found. Use --list-models to see available models.', MODEL),
        ("400 This model's maximum context length is 8192 tokens.", CONTEXT),
        ("500 fake server scripted error", SERVER),
        ("503 Service Unavailable", SERVER),
        ("529 Overloaded", CAPACITY),
        ("Connection error.", NETWORK),
        ("Request timed out.", NETWORK),
        ("400 Bad request: tool schema", ""),
        ("something else entirely", ""),
    ],
)
def test_each_error_message_names_its_reason(message: str, reason: str) -> None:
    """Sentences first (a quota or a full context also comes as a 429 or a 400), then the
    HTTP status the message starts with; anything else is left to the daemon's text rules."""
    assert failure_reason(message) == reason
