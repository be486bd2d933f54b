"""The Codex `exec --json` parser, on transcripts recorded from the real CLI (0.169.0)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from backends.base import MessageType, ParseStep, RunStatus, Usage
from backends.codex.events import CodexEventParser
from tests.backends.support import (
    feed_file,
    messages,
    of_type,
    read_meta,
    results_named_after_calls,
)

FIXTURES = Path(__file__).parents[2] / "fixtures" / "codex"
MODEL = "gpt-fake"
# What the fake OpenAI API reports per request (tests/fakes/openai_api.py).
ONE_REQUEST = Usage("codex", MODEL, 150, 30, 50, 0)


def meta(name: str) -> dict[str, Any]:
    return read_meta(FIXTURES / f"{name}.meta.json")


def replay(
    name: str, resuming: str = "", baseline: dict[str, int] | None = None
) -> tuple[CodexEventParser, list[ParseStep]]:
    parser = CodexEventParser(MODEL, resuming=resuming, baseline=baseline)
    return parser, feed_file(parser, FIXTURES / f"{name}.jsonl")


def test_text_run_completes_with_output_thread_and_usage() -> None:
    """An answer yields the thread status, the text and a completed result with usage."""
    parser, steps = replay("text")
    status = messages(steps)[0]
    assert status.type is MessageType.STATUS and status.session_id == parser.thread_id != ""
    (text,) = of_type(steps, MessageType.TEXT)
    assert text.content == "Hello from the fake OpenAI server. The task is done."
    (final,) = of_type(steps, MessageType.RESULT)
    assert final.usage == (ONE_REQUEST,)
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED
    assert result.output == text.content
    assert result.session_id == parser.thread_id
    assert result.usage == (ONE_REQUEST,)


def test_cli_warning_items_are_error_messages_that_do_not_fail_the_run() -> None:
    """An `error` item (here: unknown model metadata) is shown as an error; the run completes."""
    parser, steps = replay("text")
    (warning,) = of_type(steps, MessageType.ERROR)
    assert "Model metadata" in warning.content
    assert parser.finish(0, "").status is RunStatus.COMPLETED


def test_reasoning_is_thinking() -> None:
    """A reasoning item becomes a thinking message before the answer."""
    _, steps = replay("reasoning")
    kinds = [m.type for m in messages(steps) if m.type in (MessageType.THINKING, MessageType.TEXT)]
    assert kinds == [MessageType.THINKING, MessageType.TEXT]
    assert of_type(steps, MessageType.THINKING)[0].content == "Adding 2 and 2."


def test_command_execution_is_a_tool_call() -> None:
    """A command execution yields tool_use at its start and tool_result at its end."""
    parser, steps = replay("shell")
    (use,) = of_type(steps, MessageType.TOOL_USE)
    (done,) = of_type(steps, MessageType.TOOL_RESULT)
    assert use.tool == "shell" and use.input is not None
    assert "echo hi && sleep 1" in use.input["command"]
    assert done.call_id == use.call_id != ""
    assert done.output == "hi\n" and not done.is_error
    kinds = [m.type for m in messages(steps)]
    assert kinds.index(MessageType.TOOL_USE) < kinds.index(MessageType.TOOL_RESULT)
    assert parser.finish(0, "").usage == (Usage("codex", MODEL, 300, 60, 100, 0),)


def test_failed_command_is_an_error_tool_result() -> None:
    """A command that exits non-zero is an error tool_result; the run still completes."""
    parser, steps = replay("shell-fails")
    (done,) = of_type(steps, MessageType.TOOL_RESULT)
    assert done.is_error and done.output == "oops\n"
    assert parser.finish(0, "").status is RunStatus.COMPLETED


def test_failed_turn_fails_the_run_with_its_error() -> None:
    """turn.failed ends the run as failed with the CLI's message."""
    parser, steps = replay("error-500")
    (final,) = of_type(steps, MessageType.RESULT)
    assert final.is_error
    result = parser.finish(1, "")
    assert result.status is RunStatus.FAILED
    assert "high demand" in result.error


def test_resumed_thread_counts_only_this_runs_usage() -> None:
    """The thread's earlier usage (the baseline) is subtracted from the cumulative total."""
    first_two_runs = {
        "input_tokens": 400,
        "cached_input_tokens": 100,
        "cache_write_input_tokens": 0,
        "output_tokens": 60,
    }
    thread = meta("resume")["resume"]
    parser, steps = replay("resume", resuming=thread, baseline=first_two_runs)
    assert parser.thread_id == thread
    assert not any("was not found" in m.content for m in messages(steps))
    assert parser.finish(0, "").usage == (ONE_REQUEST,)


def test_missing_thread_is_flagged_from_stderr() -> None:
    """A resume the CLI refuses ("no rollout found") marks the session as not found."""
    thread = meta("resume-missing")["resume"]
    parser, steps = replay("resume-missing", resuming=thread)
    assert steps == []
    result = parser.finish(1, meta("resume-missing")["cli_stderr_tail"])
    assert parser.session_not_found
    assert result.status is RunStatus.FAILED


def test_unknown_thread_name_is_noted_when_the_cli_starts_fresh() -> None:
    """Given a name it cannot find, the CLI starts a new thread; the transcript says so."""
    parser, steps = replay("resume-unknown-name", resuming="no-such-thread-name")
    first = messages(steps)[0]
    assert first.type is MessageType.STATUS
    assert "no-such-thread-name was not found" in first.content
    assert parser.finish(0, "").status is RunStatus.COMPLETED
    assert not parser.session_not_found


def test_stall_without_turn_end_is_a_failure() -> None:
    """A run killed before its turn ended fails and keeps the thread id."""
    parser, steps = replay("stall")
    assert not of_type(steps, MessageType.RESULT)
    result = parser.finish(None, "")
    assert result.status is RunStatus.FAILED
    assert result.error == "codex was stopped before the turn completed"
    assert result.session_id == parser.thread_id != ""


def test_invalid_lines_are_flagged() -> None:
    """Lines that are not JSON objects, or items that are not objects, are invalid."""
    parser = CodexEventParser(MODEL)
    assert parser.feed("{oops").invalid
    assert parser.feed('"text"').invalid
    assert parser.feed('{"type": "item.completed", "item": 3}').invalid
    assert not parser.feed("").invalid


def test_tool_result_without_a_start_gets_its_tool_use() -> None:
    """A tool item seen only completed still yields a tool_use before its result."""
    parser = CodexEventParser(MODEL)
    item = {"id": "i9", "type": "file_change", "changes": [{"path": "a.py", "kind": "add"}]}
    step = parser.feed(json.dumps({"type": "item.completed", "item": {**item, "status": "ok"}}))
    assert [m.type for m in step.messages] == [MessageType.TOOL_USE, MessageType.TOOL_RESULT]
    assert step.messages[0].tool == "apply_patch"
    assert step.messages[1].output == "add a.py"


def test_plan_updates_are_logged() -> None:
    """The agent's todo list is shown as a log line per update."""
    parser = CodexEventParser(MODEL)
    items = [{"text": "read", "completed": True}, {"text": "write", "completed": False}]
    event = {"type": "item.updated", "item": {"id": "t", "type": "todo_list", "items": items}}
    (log,) = parser.feed(json.dumps(event)).messages
    assert log.type is MessageType.LOG
    assert log.content == "plan:\n[x] read\n[ ] write"


def test_a_turn_that_spent_nothing_reports_no_usage() -> None:
    """A completed turn whose counts are all zero (or all already in the baseline) is no usage
    entry, as Multica's daemon leaves such a model out."""
    parser = CodexEventParser(MODEL)
    parser.feed('{"type":"thread.started","thread_id":"t"}')
    parser.feed('{"type":"turn.completed","usage":{"input_tokens":0,"output_tokens":0}}')
    assert parser.finish(0, "").usage == ()


def test_tool_results_are_named_after_their_calls_once_transcribed() -> None:
    """A command's `item.completed` names no tool: its result reaches the transcript as `shell`,
    the name of the call it ends."""
    _, steps = replay("shell")
    assert results_named_after_calls(messages(steps)) == [("shell", "shell")]
