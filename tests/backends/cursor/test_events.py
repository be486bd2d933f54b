"""The Cursor Agent stream-json parser, on output of its documented format (Claude Code's
shape with Cursor's `thinking` and `tool_call` events, as cursor-agent 2026.07.20 prints it)."""

from __future__ import annotations

from pathlib import Path

from backends.base import MessageType, RunStatus, Usage
from backends.claude.failure import AUTH, CAPACITY
from backends.cursor.events import CursorStreamParser, call_id_of
from backends.json_lines import UNRECOGNISED_REASON
from tests.backends.support import feed_file, messages, of_type

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cursor"
SESSION = "6f1d2a0e-5b7c-4e21-9a3d-0c8b7e6f5a41"


def replay(name: str) -> tuple[CursorStreamParser, list]:  # type: ignore[type-arg]
    parser = CursorStreamParser("configured", version="2026.07.20")
    return parser, feed_file(parser, FIXTURES / f"{name}.jsonl")


def test_a_tool_is_in_flight_from_started_to_completed() -> None:
    """`tool_call/started` is the tool's use (named from its `<name>ToolCall` key, the first
    line of the two-line id), `completed` its result; a failed read's result is an error."""
    _, steps = replay("shell")
    uses, results = of_type(steps, MessageType.TOOL_USE), of_type(steps, MessageType.TOOL_RESULT)
    assert [(u.tool, u.call_id) for u in uses] == [
        ("shell", "call-7d1e-0"),
        ("read", "call-7d1e-1"),
    ]
    assert uses[0].input == {"command": "wc -l notes.txt", "workingDirectory": "", "timeout": 30000}
    assert [r.call_id for r in results] == ["call-7d1e-0", "call-7d1e-1"]
    assert "3 notes.txt" in results[0].output and not results[0].is_error
    assert results[1].is_error
    kinds = [m.type for m in messages(steps)]
    assert kinds.index(MessageType.TOOL_USE) < kinds.index(MessageType.TOOL_RESULT)


def test_an_answer_completes_with_its_text_session_thinking_and_usage() -> None:
    """The session from `system/init`, the thinking joined from its deltas (each delta a
    log, so it counts as activity), the result's text and its camelCase usage."""
    parser, steps = replay("shell")
    assert messages(steps)[0].session_id == SESSION
    assert [m.content for m in of_type(steps, MessageType.THINKING)] == [
        "Reading notes.txt and counting."
    ]
    assert sum(m.content == "thinking chunk" for m in of_type(steps, MessageType.LOG)) == 2
    (final,) = of_type(steps, MessageType.RESULT)
    assert final.output == "I'll count the lines.notes.txt has 3 lines."
    result = parser.finish(None, "")  # the worker Cursor leaves alive is killed: still done
    assert result.status is RunStatus.COMPLETED
    assert result.session_id == SESSION and result.output == final.output
    assert result.usage == (Usage("cursor", "Auto", 4200, 96, 3000, 0),)
    assert not any(step.invalid for step in steps) and parser.unrecognised == 0


def test_an_error_result_fails_the_run_named_by_its_words() -> None:
    """`is_error` fails the run with the result's words; a 429 is a capacity limit."""
    parser, _ = replay("error")
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED
    assert result.error == "429 Rate limit reached for requests"
    assert result.failure_reason == CAPACITY


def test_no_result_fails_with_the_error_event_and_the_exit() -> None:
    """Without a result line the run failed: the CLI's error event first, then how it ended."""
    parser, _ = replay("no-result")
    result = parser.finish(1, "boom")
    assert result.status is RunStatus.FAILED and result.failure_reason == AUTH
    assert result.error.startswith("401 Unauthorized: invalid API key; cursor-agent exited")
    assert "stderr: boom" in result.error


def test_older_flat_events_and_step_usage_are_read() -> None:
    """`tool_use`/`tool_result`, `text` parts and `step_finish` counts (no result usage)."""
    parser, steps = replay("legacy")
    assert [m.tool for m in of_type(steps, MessageType.TOOL_USE)] == ["bash"]
    assert [m.output for m in of_type(steps, MessageType.TOOL_RESULT)] == ["a\nb"]
    result = parser.finish(0, "")
    assert result.output == "Two files."
    assert result.usage == (Usage("cursor", "sonnet", 100, 20, 40, 0),)


def test_a_prefixed_line_is_read_and_an_unknown_subtype_never_ends_a_call() -> None:
    """`stdout:` before the JSON is dropped; a `tool_call` subtype that is no boundary is a
    log, so the call stays in flight."""
    parser = CursorStreamParser()
    step = parser.feed('stdout: {"type":"tool_call","subtype":"progress","call_id":"c"}')
    assert [m.type for m in step.messages] == [MessageType.LOG] and not step.invalid


def test_output_of_only_unknown_events_fails_as_unrecognised() -> None:
    """A CLI whose events all changed fails `agent_error.unknown`, naming its line."""
    parser = CursorStreamParser(version="2099.1.1")
    parser.feed('{"type":"session.open","id":"s"}')
    result = parser.finish(0, "")
    assert result.failure_reason == UNRECOGNISED_REASON and "session.open" in result.error


def test_call_ids_keep_their_first_line() -> None:
    """Cursor packs two ids into one; the first is the call's."""
    assert call_id_of(" call-1\nfc_2 ") == "call-1"
