"""The Qwen Code stream-json parser, on transcripts recorded from the real CLI (0.24.4) against
the fake Chat Completions API (tests/fakes/chat_api.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import MessageType, ParseStep, RunStatus, Usage
from backends.claude.failure import AUTH, CONTEXT, MODEL
from backends.json_lines import UNRECOGNISED_REASON
from backends.qwen.events import QwenStreamParser
from tests.backends.support import feed_file, messages, of_type
from tests.fakes.chat_api import MODEL as FAKE_MODEL
from tests.fakes.chat_api import USAGE

FIXTURES = Path(__file__).parents[2] / "fixtures" / "qwen"
SESSION = "458dbb50-5464-4253-b1ef-6db6a5648c2d"
"""The session of `text.jsonl`, resumed in `resume.jsonl`."""


def requests(n: int) -> Usage:
    """What `n` requests to the fake cost, input without the cached tokens."""
    cached = USAGE["cached_tokens"]
    return Usage(
        "qwen",
        FAKE_MODEL,
        input_tokens=n * (USAGE["prompt_tokens"] - cached),
        output_tokens=n * USAGE["completion_tokens"],
        cache_read_tokens=n * cached,
    )


def replay(name: str, resuming: str = "") -> tuple[QwenStreamParser, list[ParseStep]]:
    parser = QwenStreamParser("configured-model", resuming=resuming, version="0.24.4")
    return parser, feed_file(parser, FIXTURES / f"{name}.jsonl")


def test_answer_completes_with_its_text_session_and_usage() -> None:
    """An answer: the session status, the text, a completed result with the session id and
    the usage of the one request (not the result line's doubled total)."""
    parser, steps = replay("text")
    status = messages(steps)[0]
    assert status.type is MessageType.STATUS and status.session_id == SESSION
    assert "0.24.4" in status.content and FAKE_MODEL in status.content
    assert [m.content for m in of_type(steps, MessageType.TEXT)] == ["All done here."]
    assert not any(step.invalid for step in steps)
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED, result
    assert (result.output, result.session_id) == ("All done here.", SESSION)
    assert result.usage == (requests(1),)


def test_reasoning_is_thinking_before_the_answer() -> None:
    """The thinking block and the text arrive as two assistant lines; usage counts once."""
    parser, steps = replay("reasoning")
    kinds = [m.type for m in messages(steps) if m.type is not MessageType.STATUS]
    assert kinds == [MessageType.THINKING, MessageType.TEXT, MessageType.RESULT]
    result = parser.finish(0, "")
    assert result.output == "Thought it through." and result.usage == (requests(1),)


def test_a_tool_is_in_flight_from_the_models_message_to_its_result() -> None:
    """The shell call is a tool_use on the assistant line printed before it runs, a
    tool_result with its output on the user line after it."""
    parser, steps = replay("shell")
    tools = [
        m for m in messages(steps) if m.type in (MessageType.TOOL_USE, MessageType.TOOL_RESULT)
    ]
    use, done = tools
    assert use.type is MessageType.TOOL_USE and use.tool == "run_shell_command"
    assert use.input is not None and "time.sleep(3)" in use.input["command"]
    assert done.call_id == use.call_id != "" and done.output == "slept" and not done.is_error
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.output == "Slept well."
    assert result.usage == (requests(2),)


def test_a_failed_command_is_an_error_result_and_the_run_goes_on() -> None:
    """A command that exits non-zero is a tool_result marked as an error; the run completes."""
    parser, steps = replay("shell-fails")
    (done,) = of_type(steps, MessageType.TOOL_RESULT)
    assert done.is_error and "Exit Code: 3" in done.output
    assert parser.finish(0, "").status is RunStatus.COMPLETED


@pytest.mark.parametrize("name", ["stall", "tool-then-stall"])
def test_a_run_cut_before_its_result_failed_with_what_it_spent(name: str) -> None:
    """A run killed before its result line (a stalled stream) failed; what it spent so far
    is still reported."""
    parser, _ = replay(name)
    result = parser.finish(None, "")
    assert result.status is RunStatus.FAILED
    assert "before its final result" in result.error
    assert result.usage == ((requests(1),) if name == "tool-then-stall" else ())


def test_a_rate_limit_is_retried_and_each_retry_shown() -> None:
    """A 429 that does not lift: after its own silent retries Qwen Code says it retries the
    turn (a minute apart; the second notice without its numbers); killed meanwhile, the run
    failed before its result."""
    parser, steps = replay("rate-limit-retrying")
    retries = [m for m in of_type(steps, MessageType.STATUS) if "retry" in m.content]
    assert [m.content for m in retries] == ["qwen retry 1/10 in 60s", "qwen retry"]
    assert parser.finish(None, "").status is RunStatus.FAILED


def test_silent_retries_that_recover_complete() -> None:
    """Qwen Code retries 500s without a word, then answers: the run completes."""
    parser, _ = replay("recovered")
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.output == "Recovered."


@pytest.mark.parametrize(
    ("name", "reason", "said"),
    [
        ("bad-key", AUTH, "401 Incorrect API key"),
        ("no-model", MODEL, "404 The model"),
        ("context", CONTEXT, "maximum context length"),
    ],
)
def test_a_provider_failure_fails_the_run_with_its_reason(
    name: str, reason: str, said: str
) -> None:
    """The provider's error comes as an `[API Error: …]` text (shown as an error, not as the
    answer) and as the failed result: the run failed, named from the error."""
    parser, steps = replay(name)
    (error,) = of_type(steps, MessageType.ERROR)
    assert error.content.startswith("[API Error: ") and said in error.content
    assert of_type(steps, MessageType.TEXT) == []
    result = parser.finish(1, "")
    assert result.status is RunStatus.FAILED, result
    assert said in result.error and result.output == ""
    assert result.failure_reason == reason
    assert result.session_id == parser.session_id != ""


def test_resuming_the_same_session_is_no_fresh_one() -> None:
    """A resumed run's init names the session asked for: no fresh-session notice."""
    parser, steps = replay("resume", resuming=SESSION)
    assert not any("fresh" in m.content for m in messages(steps))
    assert parser.finish(0, "").session_id == SESSION


def test_a_session_qwen_does_not_have_is_reported_missing() -> None:
    """`--resume` of a session Qwen Code does not have here fails before any event: the
    parser says so, and the backend starts a fresh session."""
    parser = QwenStreamParser("m", resuming="11111111-2222-3333-4444-555555555555")
    stderr = 'No saved session found with title "11111111-2222-3333-4444-555555555555".'
    assert parser.finish(1, stderr).status is RunStatus.FAILED
    assert parser.session_not_found
    fresh = QwenStreamParser("m")
    fresh.finish(1, stderr)
    assert not fresh.session_not_found  # nothing was being resumed: no second run


def test_output_of_only_unknown_events_fails_as_unrecognised() -> None:
    """A Qwen Code whose events all changed names fails as agent_error.unknown."""
    parser = QwenStreamParser("m", version="9.0.0")
    parser.feed('{"type":"init","session":"x"}')
    result = parser.finish(0, "")
    assert result.failure_reason == UNRECOGNISED_REASON
    assert "qwen 9.0.0" in result.error and '"init"' in result.error
