"""The Copilot parser, on output recorded from the real CLI (1.0.102) and on the shapes older
CLIs printed (tests/fixtures/copilot/README.md)."""

from __future__ import annotations

from pathlib import Path

from backends.base import MessageType, ParseStep, RunStatus, Usage
from backends.claude.failure import AUTH, CAPACITY, CONTEXT, MODEL, NETWORK, SERVER
from backends.copilot.events import CopilotEventParser
from backends.json_lines import UNRECOGNISED_REASON
from tests.backends.support import feed_file, messages, of_type

FIXTURES = Path(__file__).parents[2] / "fixtures" / "copilot"


def replay(name: str, resuming: str = "") -> tuple[CopilotEventParser, list[ParseStep]]:
    parser = CopilotEventParser("", resuming, "1.0.102")
    return parser, feed_file(parser, FIXTURES / f"{name}.jsonl")


def test_an_answer_completes_with_its_text_and_session() -> None:
    """The recorded answer completes with the message as output and the session id."""
    parser, steps = replay("text")
    (text,) = of_type(steps, MessageType.TEXT)
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED
    assert result.output == text.content == "All done here."
    assert result.session_id and result.error == ""
    assert parser.unrecognised == 0


def test_a_tool_is_in_flight_from_its_start_to_its_end() -> None:
    """`tool.execution_start` opens the call (tool_use), `tool.execution_complete` closes it
    (tool_result, same call id); nothing else lies between them but the CLI's bookkeeping."""
    parser, steps = replay("shell")
    said = [m for m in messages(steps) if m.type in (MessageType.TOOL_USE, MessageType.TOOL_RESULT)]
    use, done = said
    assert (use.type, use.tool, use.input) == (
        MessageType.TOOL_USE,
        "bash",
        {"command": "sleep 1 && echo slept", "description": "Run the scripted command"},
    )
    assert done.type is MessageType.TOOL_RESULT and done.call_id == use.call_id != ""
    assert "slept" in done.output and not done.is_error
    kinds = [m.type for m in messages(steps)]
    assert kinds.index(MessageType.TOOL_USE) < kinds.index(MessageType.TOOL_RESULT)
    assert parser.finish(0, "").output == "Slept."


def test_a_tool_announced_only_in_the_message_still_pairs_up() -> None:
    """An older CLI names the call only in `toolRequests`: its end brings the tool_use (from
    the request) right before the tool_result."""
    _, steps = replay("older-tool")
    use, done = [
        m for m in messages(steps) if m.type in (MessageType.TOOL_USE, MessageType.TOOL_RESULT)
    ]
    assert (use.tool, use.call_id, use.input) == (
        "bash",
        "toolu_01list",
        {"command": "ls", "description": "List files"},
    )
    assert (done.call_id, done.output) == ("toolu_01list", "a.go\nb.go\n")


def test_usage_is_reported_per_model_from_the_session_totals() -> None:
    """A fresh session reports the session's totals, input without the cached tiers; the
    per-call and per-message counts of the same tokens are not added."""
    parser, _ = replay("older-usage")
    result = parser.finish(0, "")
    assert result.usage == (Usage("copilot", "claude-sonnet-4.5", 4000, 900, 24000, 2000),)
    assert result.session_id == "6f0c2a4e-1b7d-4c55-9e0a-2d3b4c5d6e7f"


def test_a_resumed_session_reports_its_calls_not_the_whole_sessions_totals() -> None:
    """Resumed, the session's totals include earlier runs: the per-call counts are reported."""
    parser, _ = replay("older-usage", resuming="6f0c2a4e-1b7d-4c55-9e0a-2d3b4c5d6e7f")
    assert parser.finish(0, "").usage == (
        Usage("copilot", "claude-sonnet-4.5", 1500, 250, 9000, 1500),
    )


def test_a_message_names_the_model_its_tokens_go_to() -> None:
    """With only `outputTokens`, each message's tokens go to the model in force then."""
    parser, _ = replay("older-tool")
    assert set(parser.finish(0, "").usage) == {
        Usage("copilot", "copilot", 0, 112, 0, 0),
        Usage("copilot", "claude-opus-4.6", 0, 106, 0, 0),
    }


def test_the_current_cli_reports_no_usage() -> None:
    """1.0.102 keeps every token count off its JSON output: no usage entry, not a zero one."""
    parser, _ = replay("shell")
    assert parser.finish(0, "").usage == ()


def test_failures_are_named_from_the_session_error() -> None:
    """Each recorded provider failure fails the run with the CLI's words and its reason."""
    cases = {
        "api-bad-key": (AUTH, "Authentication failed"),
        "api-context": (CONTEXT, "maximum context length"),
        "api-no-model": (MODEL, "not found on provider"),
        "api-500": (SERVER, "Failed to get response"),
        "api-rate-limit": (CAPACITY, "429 Rate limit reached"),
        "api-refused": (NETWORK, "Could not connect"),
        "older-rate-limit": (CAPACITY, "Rate limit exceeded"),
    }
    for name, (reason, words) in cases.items():
        parser, steps = replay(name)
        result = parser.finish(1, "")
        assert result.status is RunStatus.FAILED, name
        assert (result.failure_reason, words in result.error) == (reason, True), name
        assert "copilot exited with code 1" in result.error, name
        assert any(words in m.content for m in of_type(steps, MessageType.ERROR)), name


def test_a_run_that_stops_before_its_result_fails_with_what_it_had() -> None:
    """Killed mid-stream: failed, with the streamed text so far and the session it knew."""
    parser = CopilotEventParser()
    lines = (FIXTURES / "older-usage.jsonl").read_text().splitlines()[:3]
    for line in lines:
        parser.feed(line)
    result = parser.finish(None, "")
    assert result.status is RunStatus.FAILED
    assert result.output == "Counted."
    assert result.session_id == "6f0c2a4e-1b7d-4c55-9e0a-2d3b4c5d6e7f"
    assert "copilot was stopped before its result" in result.error


def test_an_unknown_session_to_resume_is_noticed() -> None:
    """`--resume` of a session the CLI does not know: the parser says so for the fallback."""
    parser = CopilotEventParser("", resuming="gone-1")
    tail = "Error: No session, task, or name matched 'gone-1'.\n"
    assert parser.finish(1, tail).status is RunStatus.FAILED
    assert parser.session_not_found


def test_output_of_an_unknown_shape_fails_as_unrecognised() -> None:
    """Only events of types the parser does not know: `agent_error.unknown`, naming the CLI,
    its version and the first line."""
    parser = CopilotEventParser("", "", "1.9.0")
    parser.feed('{"type":"conversation.opened","data":{}}')
    result = parser.finish(0, "")
    assert result.failure_reason == UNRECOGNISED_REASON
    assert "copilot 1.9.0" in result.error and "conversation.opened" in result.error
