"""Why a Claude Code run failed, read from recorded stream-json of the real CLI (2.1.328)
answering the API's real failure shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import RunStatus
from backends.claude.failure import failure_reason
from backends.claude.stream import ClaudeStreamParser
from daemon.protocol.failure import REASONS, known_reason
from daemon.protocol.failure_text import API_INVALID_REQUEST, classify, poisoned
from tests.backends.support import feed_file

FIXTURES = Path(__file__).parents[2] / "fixtures" / "claude-stream-json"


def go_text_reason(error: str) -> str:
    """What Multica's daemon and server make of the error text alone."""
    return API_INVALID_REQUEST if poisoned(error) else classify(error)


@pytest.mark.parametrize(
    ("name", "reason", "by_text"),
    [
        # 429 tokens-per-minute: the text's "tokens … limit" reads as a context overflow.
        (
            "api-rate-limit",
            "agent_error.provider_capacity_or_rate_limit",
            "agent_error.context_overflow",
        ),
        ("api-prompt-too-long", "agent_error.context_overflow", "agent_error.context_overflow"),
        (
            "api-credit-balance",
            "agent_error.provider_quota_limit",
            "agent_error.provider_quota_limit",
        ),
        (
            "api-bad-key",
            "agent_error.provider_auth_or_access",
            "agent_error.provider_auth_or_access",
        ),
        # 404 model: "you may not have access to it" reads as an auth failure.
        (
            "api-no-model",
            "agent_error.model_not_found_or_unavailable",
            "agent_error.provider_auth_or_access",
        ),
        # A dropped stream: no rule of the text's matches ECONNRESET.
        ("api-cut", "agent_error.provider_network", "agent_error.unknown"),
        (
            "error-529",
            "agent_error.provider_capacity_or_rate_limit",
            "agent_error.provider_capacity_or_rate_limit",
        ),
    ],
)
def test_each_api_failure_is_named_from_the_fields(name: str, reason: str, by_text: str) -> None:
    """The recorded failure's reason comes from the CLI's fields; the text alone says `by_text`."""
    parser = ClaudeStreamParser()
    feed_file(parser, FIXTURES / f"{name}.jsonl")
    result = parser.finish(1, "")
    assert result.status is RunStatus.FAILED
    assert result.failure_reason == reason and reason in REASONS
    assert known_reason(result.failure_reason, result.error) == reason
    assert go_text_reason(result.error) == by_text


def test_a_run_the_cli_recovered_by_itself_completes_with_its_usage() -> None:
    """529 twice then an answer: the CLI retried on its own, the run completes, usage counted."""
    parser = ClaudeStreamParser()
    feed_file(parser, FIXTURES / "api-overloaded-twice.jsonl")
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.failure_reason == ""
    (usage,) = result.usage
    assert (usage.provider, usage.input_tokens, usage.cache_read_tokens) == ("claude", 100, 7)


def test_prompt_too_long_fails_even_when_the_cli_calls_it_a_success() -> None:
    """`terminal_reason: prompt_too_long` on a result without `is_error` still fails the run."""
    parser = ClaudeStreamParser()
    parser.feed(
        '{"type":"result","subtype":"success","is_error":false,'
        '"terminal_reason":"prompt_too_long","result":"Prompt is too long"}'
    )
    result = parser.finish(0, "")
    assert (result.status, result.failure_reason) == (
        RunStatus.FAILED,
        "agent_error.context_overflow",
    )


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        (
            {"api_error_status": 500, "api_error_type": "api_error"},
            "agent_error.provider_server_error",
        ),
        (
            {"api_error_status": 403, "api_error_type": "permission_error"},
            "agent_error.provider_auth_or_access",
        ),
        ({"api_error_status": 400, "api_error_type": "invalid_request_error"}, ""),
        ({"terminal_reason": "max_turns"}, ""),
    ],
)
def test_fields_without_an_error_kind(fields: dict[str, object], reason: str) -> None:
    """Status and type decide without the assistant line; what they leave open is ""."""
    assert failure_reason(fields, None) == reason


def test_a_stopped_run_reports_the_usage_of_its_assistant_messages() -> None:
    """Without a result line, usage is the sum of the assistant lines, each message once."""
    parser = ClaudeStreamParser()
    steps = feed_file(parser, FIXTURES / "tool-then-stall.jsonl")
    result = parser.finish(None, "")
    assert result.status is RunStatus.FAILED
    (usage,) = result.usage
    assert usage.provider == "claude" and usage.input_tokens > 0
    carried = [m.usage for s in steps for m in s.messages if m.usage]
    assert carried and carried[-1] == result.usage
