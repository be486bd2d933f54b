"""The DeepSeek Harness frame parser, on frames of its documented protocol (version 1)."""

from __future__ import annotations

from pathlib import Path

from backends.base import MessageType, RunStatus, Usage
from backends.claude.failure import CAPACITY
from backends.dsh.frames import DshFrameParser
from tests.backends.support import feed_file, of_type

FIXTURES = Path(__file__).parents[2] / "fixtures" / "dsh"


def test_a_request_runs_from_session_to_result_with_its_tools_and_usage() -> None:
    """Session, thinking, a tool in flight from call to result (its JSON arguments as the
    input), text, usage per provider/model; frames of another request are ignored."""
    parser = DshFrameParser("task-1")
    steps = feed_file(parser, FIXTURES / "shell.jsonl")
    (use,) = of_type(steps, MessageType.TOOL_USE)
    assert (use.tool, use.call_id, dict(use.input or {})) == ("shell", "c1", {"command": "ls"})
    assert [m.output for m in of_type(steps, MessageType.TOOL_RESULT)] == ["a\nb\n"]
    assert [m.content for m in of_type(steps, MessageType.TEXT)] == ["Two files."]
    assert [
        s.close_stdin for s in steps if s.messages and s.messages[-1].type is MessageType.RESULT
    ] == [True]
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.output == "Two files."
    assert result.session_id == "dsh-sess-42"
    assert result.usage == (Usage("dsh", "deepseek-official/deepseek-v4-flash", 1850, 38, 1100, 0),)


def test_a_failed_result_is_named_from_its_error() -> None:
    """`status: failed` with `error {code, message}`; a 429 is a capacity limit."""
    parser = DshFrameParser("task-1")
    feed_file(parser, FIXTURES / "failed.jsonl")
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED and result.failure_reason == CAPACITY
    assert result.error == "provider_error: 429 Rate limit reached for requests"


def test_a_rejected_resume_says_the_session_is_gone() -> None:
    """`resume_rejected` on a resumed run is not its result: a fresh session follows."""
    parser = DshFrameParser("task-1", resuming="old-1")
    feed_file(parser, FIXTURES / "resume-rejected.jsonl")
    assert parser.session_not_found


def test_another_protocol_version_is_a_protocol_error() -> None:
    """A frame of version 2 fails the run unless a result follows, and says so."""
    parser = DshFrameParser("r")
    parser.feed('{"v": 2, "type": "ready", "runtime": "dsh"}')
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED
    assert "unsupported protocol version 2" in result.error


def test_exiting_before_ready_says_so() -> None:
    """A dsh without the profile exits before `ready`: the error says the protocol never
    came up."""
    result = DshFrameParser("r").finish(1, "unknown option --stdio")
    assert "before the runtime protocol became ready" in result.error
