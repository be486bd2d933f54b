"""The Claude Code stream-json parser, on transcripts recorded from the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backends.base import MessageType, ParseStep, RunStatus, Usage
from backends.claude.stream import ClaudeStreamParser
from tests.backends.support import (
    feed_file,
    messages,
    of_type,
    read_meta,
    results_named_after_calls,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "claude-stream-json"
STALLS = ["stall", "stall-mid", "stall-headers", "stall-mid-partial", "tool-then-stall"]


def meta(name: str) -> dict[str, Any]:
    return read_meta(FIXTURES / f"{name}.meta.json")


def replay(name: str, resuming: str = "") -> tuple[ClaudeStreamParser, list[ParseStep]]:
    """Feed a recorded transcript line by line."""
    parser = ClaudeStreamParser(resuming=resuming)
    return parser, feed_file(parser, FIXTURES / f"{name}.jsonl")


def test_text_run_completes_with_output_and_session() -> None:
    """A plain answer yields a status with the session id, the text and a completed result."""
    parser, steps = replay("text")
    kinds = [m.type for m in messages(steps)]
    assert kinds == [MessageType.STATUS, MessageType.TEXT, MessageType.RESULT]
    session = "d16d7870-f359-496f-ae6c-ebb9b542cc4b"
    assert messages(steps)[0].session_id == session
    assert "2.1.328" in messages(steps)[0].content
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED
    assert result.output == "Hello from the fake Anthropic server. The task is done."
    assert result.session_id == session
    assert result.exit_code == 0


def test_result_carries_usage_per_model() -> None:
    """The result's per-model usage becomes anthropic `Usage` entries."""
    parser, steps = replay("text")
    expected = (Usage("claude", "claude-opus-5-5", 12362, 25, 0, 0),)
    assert of_type(steps, MessageType.RESULT)[0].usage == expected
    assert parser.finish(0, "").usage == expected


def test_result_line_closes_stdin() -> None:
    """Only the result line asks for stdin to be closed."""
    _, steps = replay("text")
    assert [s.close_stdin for s in steps] == [False, False, True]


def test_tool_call_round_trips() -> None:
    """A Bash call yields a tool_use and a tool_result with the same call id."""
    parser, steps = replay("tool-sleep-3")
    (use,) = of_type(steps, MessageType.TOOL_USE)
    (result,) = of_type(steps, MessageType.TOOL_RESULT)
    assert use.tool == "Bash"
    assert use.call_id.startswith("toolu_")
    assert use.input is not None and "sleep 3" in use.input["command"]
    assert result.call_id == use.call_id
    assert not result.is_error
    assert parser.finish(0, "").status is RunStatus.COMPLETED


def test_tool_progress_is_activity_not_a_result() -> None:
    """A heartbeat during a long tool is a log tied to the running call, not its result."""
    _, steps = replay("tool-sleep-35")
    (use,) = of_type(steps, MessageType.TOOL_USE)
    heartbeats = [m for m in of_type(steps, MessageType.LOG) if "still running" in m.content]
    assert len(heartbeats) == 1
    assert heartbeats[0].call_id == use.call_id
    assert heartbeats[0].tool == "Bash"
    assert len(of_type(steps, MessageType.TOOL_RESULT)) == 1


def test_several_tools_pair_up_in_order() -> None:
    """Three sequential tool calls each get their result before the next call starts."""
    _, steps = replay("many-tools-3")
    tool_messages = [
        m for m in messages(steps) if m.type in (MessageType.TOOL_USE, MessageType.TOOL_RESULT)
    ]
    assert [m.type for m in tool_messages] == [MessageType.TOOL_USE, MessageType.TOOL_RESULT] * 3
    for use, result in zip(tool_messages[::2], tool_messages[1::2], strict=True):
        assert use.call_id == result.call_id
    assert len({m.call_id for m in tool_messages}) == 3


def test_permission_denied_is_an_error_tool_result() -> None:
    """A denied tool yields a log naming the denial and an error tool_result; the run completes."""
    parser, steps = replay("bash-denied")
    (use,) = of_type(steps, MessageType.TOOL_USE)
    (result,) = of_type(steps, MessageType.TOOL_RESULT)
    denied = [m for m in of_type(steps, MessageType.LOG) if "permission_denied" in m.content]
    assert denied and denied[0].call_id == use.call_id
    assert result.call_id == use.call_id and result.is_error
    assert "needs approval" in result.output
    assert parser.finish(0, "").status is RunStatus.COMPLETED


def test_api_retries_are_status_messages() -> None:
    """Each API retry is a visible status naming the HTTP status and the attempt."""
    _, steps = replay("error-529")
    retries = [m for m in of_type(steps, MessageType.STATUS) if "retry" in m.content]
    assert [m.content.split(";")[0] for m in retries] == ["API error 529 (overloaded)"] * 2
    assert "retry 2 of 2" in retries[1].content


def test_error_result_fails_even_with_success_subtype() -> None:
    """A result with is_error true fails the run with the CLI's error text."""
    parser, steps = replay("error-529")
    (final,) = of_type(steps, MessageType.RESULT)
    assert final.is_error
    (api_error,) = of_type(steps, MessageType.ERROR)
    assert api_error.content.startswith("API Error: 529")
    result = parser.finish(1, "")
    assert result.status is RunStatus.FAILED
    assert "API Error: 529" in result.error
    assert not of_type(steps, MessageType.TEXT)


def test_resumed_run_reports_the_same_session_and_only_its_own_usage() -> None:
    """A resumed run keeps the session id and counts only this run's tokens, not the session's."""
    parser, _ = replay("resume", resuming=meta("resume")["first_session_id"])
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED
    assert result.session_id == meta("resume")["first_session_id"]
    # modelUsage says 37297 input tokens: the whole session, earlier runs included.
    assert result.usage == (Usage("claude", "claude-opus-5-5", 12487, 25, 0, 0),)
    assert not parser.session_not_found


def test_missing_session_is_flagged_not_reported() -> None:
    """When the session to resume is gone, the parser flags it and emits no result."""
    parser, steps = replay("resume-missing", resuming="0b7e3c52-9a53-4c41-8d36-0d1e6f1e2a77")
    assert parser.session_not_found
    assert messages(steps) == []
    assert steps[-1].close_stdin
    assert parser.finish(1, "No conversation found with session ID: x").session_id == ""


def test_missing_session_without_resume_is_a_plain_failure() -> None:
    """The same line in a run that did not ask to resume is just a failed result."""
    parser, steps = replay("resume-missing")
    assert not parser.session_not_found
    assert of_type(steps, MessageType.RESULT)[0].is_error
    result = parser.finish(1, "")
    assert result.status is RunStatus.FAILED
    assert "No conversation found" in result.error


@pytest.mark.parametrize("name", STALLS)
def test_stall_without_result_is_a_failure(name: str) -> None:
    """A transcript that ends without a result line fails, keeping the session id."""
    parser, steps = replay(name)
    assert not of_type(steps, MessageType.RESULT)
    result = parser.finish(None, "")
    assert result.status is RunStatus.FAILED
    assert "before its final result" in result.error
    assert result.session_id == messages(steps)[0].session_id != ""


def test_exit_without_result_carries_the_stderr_tail() -> None:
    """A CLI that exits without a result fails with its exit code and stderr tail."""
    parser, _ = replay("stall")
    result = parser.finish(1, "Error: something broke\n")
    assert result.error == (
        "claude exited with code 1 before its final result; stderr: Error: something broke"
    )
    assert result.exit_code == 1


def test_partial_messages_do_not_flood_the_transcript() -> None:
    """stream_event lines produce nothing; the complete assistant text comes once."""
    parser, steps = replay("text-partial")
    assert [m.content for m in of_type(steps, MessageType.TEXT)] == [
        "Hello from the fake Anthropic server. The task is done."
    ]
    assert parser.finish(0, "").status is RunStatus.COMPLETED


def test_thinking_block_is_a_thinking_message() -> None:
    """A thinking block becomes a thinking message before the answer's text."""
    _, steps = replay("thinking")
    kinds = [m.type for m in messages(steps) if m.type in (MessageType.THINKING, MessageType.TEXT)]
    assert kinds == [MessageType.THINKING, MessageType.TEXT]
    assert of_type(steps, MessageType.THINKING)[0].content == "2 + 2 is 4."


def test_invalid_lines_are_flagged_and_skipped() -> None:
    """Lines that are not JSON objects are invalid; blank lines are ignored quietly."""
    parser = ClaudeStreamParser()
    assert parser.feed("not json {").invalid
    assert parser.feed("[1, 2]").invalid
    blank = parser.feed("   ")
    assert not blank.invalid and not blank.messages


def test_can_use_tool_request_is_allowed() -> None:
    """A permission request is answered on stdin with an allow response echoing the input."""
    parser = ClaudeStreamParser()
    step = parser.feed(
        json.dumps(
            {
                "type": "control_request",
                "request_id": "req-7",
                "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"x": 1}},
            }
        )
    )
    assert step.messages == []
    (reply,) = step.replies
    assert reply.endswith(b"\n")
    assert json.loads(reply) == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": "req-7",
            "response": {"behavior": "allow", "updatedInput": {"x": 1}},
        },
    }


def test_unknown_control_request_gets_an_error_reply() -> None:
    """A control request the daemon does not handle is refused, not left unanswered."""
    parser = ClaudeStreamParser()
    request = {"type": "control_request", "request_id": "r1", "request": {"subtype": "x"}}
    step = parser.feed(json.dumps(request))
    (reply,) = step.replies
    assert json.loads(reply)["response"]["subtype"] == "error"


def test_unknown_event_type_is_logged() -> None:
    """An event type this parser does not know still counts as activity, as a log."""
    step = ClaudeStreamParser().feed('{"type": "rate_limit_event", "session_id": "s"}')
    assert [m.type for m in step.messages] == [MessageType.LOG]
    assert "rate_limit_event" in step.messages[0].content


def test_error_subtype_fails_the_run() -> None:
    """A result whose subtype is an error (max turns) fails even without is_error."""
    parser = ClaudeStreamParser()
    parser.feed('{"type": "result", "subtype": "error_max_turns", "session_id": "s1"}')
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED
    assert "error_max_turns" in result.error


def test_second_result_is_only_logged() -> None:
    """A second result line never replaces the first one."""
    parser = ClaudeStreamParser()
    parser.feed('{"type": "result", "subtype": "success", "result": "first", "session_id": "s"}')
    step = parser.feed('{"type": "result", "subtype": "success", "result": "second"}')
    assert [m.type for m in step.messages] == [MessageType.LOG]
    assert parser.finish(0, "").output == "first"


def test_tool_results_are_named_after_their_calls_once_transcribed() -> None:
    """Claude names a tool only on its `tool_use`: each result reaches the transcript under the
    name of the call its `tool_use_id` points at."""
    _, steps = replay("many-tools-3")
    pairs = results_named_after_calls(messages(steps))
    assert len(pairs) == 3 and all(call and call == result for call, result in pairs)
