"""Why a Codex run failed, read from recorded `exec --json` output of the real CLI (0.169.0)
answering the API's real limit shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import RunStatus
from backends.codex.events import CodexEventParser
from backends.codex.failure import failure_reason, limit_resets
from daemon.protocol.failure import REASONS
from daemon.protocol.failure_text import classify
from tests.backends.support import feed_file

FIXTURES = Path(__file__).parents[2] / "fixtures" / "codex"


@pytest.mark.parametrize(
    ("name", "reason", "by_text", "resets"),
    [
        (
            "api-rate-limit",
            "agent_error.provider_capacity_or_rate_limit",
            "agent_error.provider_capacity_or_rate_limit",
            "",
        ),
        (
            "api-no-quota",
            "agent_error.provider_quota_limit",
            "agent_error.provider_quota_limit",
            "",
        ),
        (
            "api-usage-limit",
            "agent_error.provider_quota_limit",
            "agent_error.provider_quota_limit",
            "1:25 PM",
        ),
        # Codex's wording of a 500 matches none of the text rules.
        ("error-500", "agent_error.provider_server_error", "agent_error.unknown", ""),
    ],
)
def test_each_limit_is_named_with_its_reset(
    name: str, reason: str, by_text: str, resets: str
) -> None:
    """The failed turn's sentence names the reason and, for a usage limit, when it lifts."""
    parser = CodexEventParser("gpt-fake")
    feed_file(parser, FIXTURES / f"{name}.jsonl")
    result = parser.finish(1, "")
    assert result.status is RunStatus.FAILED
    assert (result.failure_reason, result.limit_resets) == (reason, resets)
    assert reason in REASONS
    assert classify(result.error) == by_text


@pytest.mark.parametrize(
    ("sentence", "reason"),
    [
        (
            "stream disconnected before completion: Incomplete response returned",
            "agent_error.provider_network",
        ),
        (
            "Codex ran out of room in the model's context window. Start a new thread.",
            "agent_error.context_overflow",
        ),
        (
            "Selected model is at capacity. Please try a different model.",
            "agent_error.provider_capacity_or_rate_limit",
        ),
        ("unexpected status 401 Unauthorized: invalid key", "agent_error.provider_auth_or_access"),
        ("unexpected status 404 Not Found", "agent_error.model_not_found_or_unavailable"),
        ("exceeded retry limit, last status: 502 Bad Gateway", "agent_error.provider_server_error"),
        ("unexpected status 400 Bad Request", ""),
        ("the agent wrote something odd", ""),
    ],
)
def test_the_clis_other_sentences(sentence: str, reason: str) -> None:
    """Each of the CLI's own error sentences maps to one reason; anything else is left open."""
    assert failure_reason(sentence) == reason


def test_a_reset_in_other_words_is_kept_as_said() -> None:
    """The reset time is the CLI's own words, whatever their format; none said is ""."""
    said = "You've hit your usage limit. Try later or try again at Nov 27th, 2026 2:05 PM."
    assert limit_resets(said) == "Nov 27th, 2026 2:05 PM"
    assert limit_resets("Quota exceeded. Check your plan and billing details.") == ""
