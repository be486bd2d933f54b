"""Tests for the `command` line protocol parser."""

from __future__ import annotations

import json
from typing import Any

from backends.base import Message, MessageType, RunStatus, Usage
from backends.command.lineproto import TEXT_OUTPUT_LIMIT, LineProtocolParser, describe_exit
from tests.backends.support import as_transcribed


def feed(parser: LineProtocolParser, event: dict[str, Any] | str) -> list[Message]:
    line = event if isinstance(event, str) else json.dumps(event)
    return parser.feed(line).messages


def test_plain_lines_become_text() -> None:
    """A line that is not JSON is a text message carrying the line."""
    assert feed(LineProtocolParser(), "compiling foo.c") == [
        Message(MessageType.TEXT, content="compiling foo.c")
    ]


def test_json_without_a_known_type_becomes_text() -> None:
    """JSON objects with no or an unknown type, and JSON non-objects, are text."""
    parser = LineProtocolParser()
    for line in ('{"type": "banner", "x": 1}', '{"content": "hi"}', "[1, 2]", "42"):
        assert feed(parser, line) == [Message(MessageType.TEXT, content=line)]


def test_known_types_become_typed_messages() -> None:
    """Each protocol type maps onto the message model with its fields."""
    parser = LineProtocolParser()
    tool_use = {"type": "tool_use", "tool": "Bash", "call_id": "c1", "input": {"command": "make"}}
    assert feed(parser, tool_use) == [
        Message(MessageType.TOOL_USE, tool="Bash", call_id="c1", input={"command": "make"})
    ]
    tool_result = {"type": "tool_result", "call_id": "c1", "output": "ok", "is_error": True}
    assert feed(parser, tool_result) == [
        Message(MessageType.TOOL_RESULT, call_id="c1", output="ok", is_error=True)
    ]
    for kind in ("text", "thinking", "error", "log"):
        assert feed(parser, {"type": kind, "content": "c"}) == [
            Message(MessageType(kind), content="c")
        ]


def test_a_known_type_with_bad_fields_is_kept_as_text_and_flagged() -> None:
    """A message that does not fit the model is kept as text (nothing lost) and counted."""
    line = '{"type": "tool_use", "tool": "Bash", "input": "make"}'
    step = LineProtocolParser().feed(line)
    assert step.invalid
    assert step.messages == [Message(MessageType.TEXT, content=line)]


def test_blank_lines_emit_nothing() -> None:
    """Blank lines produce no message."""
    assert LineProtocolParser().feed("   ").messages == []


def test_exit_zero_completes_with_the_joined_text() -> None:
    """Without a result line, the output is the text lines joined (blank lines kept)."""
    parser = LineProtocolParser()
    for line in ("hello", "", "world", '{"type": "log", "content": "not output"}'):
        parser.feed(line)
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED
    assert result.output == "hello\n\nworld"
    assert result.exit_code == 0


def test_the_result_line_supplies_output_session_and_usage() -> None:
    """The result line's output wins over text; its session id and usage are kept."""
    parser = LineProtocolParser(provider="command")
    parser.feed("some chatter")
    usage = {"input_tokens": 10, "output_tokens": 2, "model": "m1"}
    event = {"type": "result", "output": "answer", "session_id": "s1", "usage": usage}
    messages = feed(parser, event)
    assert messages[0].type is MessageType.RESULT
    result = parser.finish(0, "")
    assert (result.status, result.output, result.session_id) == (
        RunStatus.COMPLETED,
        "answer",
        "s1",
    )
    assert result.usage == (Usage("command", "m1", input_tokens=10, output_tokens=2),)


def test_usage_as_a_list_of_per_model_entries() -> None:
    """A usage list gives one Usage per model; Anthropic cache field names are understood."""
    parser = LineProtocolParser()
    usage = [
        {"provider": "anthropic", "model": "a", "input_tokens": 1, "cache_read_input_tokens": 4},
        {"model": "b", "output_tokens": 2, "cache_write_tokens": 3},
        "junk",
    ]
    feed(parser, {"type": "result", "usage": usage})
    assert parser.finish(0, "").usage == (
        Usage("anthropic", "a", input_tokens=1, cache_read_tokens=4),
        Usage("command", "b", output_tokens=2, cache_write_tokens=3),
    )


def test_session_id_comes_from_status_messages() -> None:
    """A status message's session id is the run's session id until a later one replaces it."""
    parser = LineProtocolParser()
    feed(parser, {"type": "status", "session_id": "s-early"})
    assert parser.finish(0, "").session_id == "s-early"


def test_nonzero_exit_fails_with_the_stderr_tail() -> None:
    """A failing exit names the exit code and carries the stderr tail."""
    result = LineProtocolParser().finish(3, "fatal: no such file\n")
    assert result.status is RunStatus.FAILED
    assert result.error == "exit code 3: fatal: no such file"


def test_a_failing_exit_names_the_agents_last_error_event() -> None:
    """An agent that said why in `error` messages fails with the last of them, not with
    "no error output" or its stderr noise."""
    parser = LineProtocolParser()
    feed(parser, {"type": "error", "content": "retrying the API"})
    feed(parser, {"type": "error", "content": "invalid API key\n"})
    feed(parser, {"type": "text", "content": "giving up"})
    assert parser.finish(3, "").error == "exit code 3: invalid API key"
    assert parser.finish(3, "DEBUG: shutting down\n").error == "exit code 3: invalid API key"


def test_a_failing_exit_names_the_last_stderr_line() -> None:
    """Without an error message, the last line the agent wrote on stderr says why (the end of
    a traceback is its exception)."""
    tail = "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'token'\n\n"
    assert LineProtocolParser().finish(1, tail).error == "exit code 1: KeyError: 'token'"


def test_a_result_error_is_preferred_to_stderr_and_fails_even_on_exit_zero() -> None:
    """The result line's error explains the failure; an explicit error is never a success."""
    parser = LineProtocolParser()
    message = feed(parser, {"type": "result", "error": "quota exceeded"})[0]
    assert message.is_error and message.content == "quota exceeded"
    assert parser.finish(1, "noise").error == "exit code 1: quota exceeded"
    assert parser.finish(0, "").status is RunStatus.FAILED


def test_describe_exit_names_signals() -> None:
    """Exit codes, signals and a missing exit are each named plainly."""
    assert describe_exit(2) == "exit code 2"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(None) == "did not exit"
    assert LineProtocolParser().finish(-15, "").error == "killed by SIGTERM: no error output"


def test_joined_text_is_bounded_to_its_end() -> None:
    """Endless text keeps only about the last megabyte, marked as cut."""
    parser = LineProtocolParser()
    line = "y" * 1000
    for _ in range(3 * TEXT_OUTPUT_LIMIT // 1000):
        parser.feed(line)
    parser.feed("the end")
    output = parser.finish(0, "").output
    assert output.startswith("[earlier output cut]\n")
    assert output.endswith("\nthe end")
    assert len(output) <= TEXT_OUTPUT_LIMIT + 100


def test_tool_results_are_named_after_their_calls_once_transcribed() -> None:
    """An agent of the line protocol may leave `tool` off a result: it reaches the transcript
    under its call's name, by `call_id`, or first in first out for calls without one."""
    parser = LineProtocolParser()
    lines = [
        {"type": "tool_use", "tool": "Bash", "call_id": "c1"},
        {"type": "tool_use", "tool": "Read", "call_id": "c2"},
        {"type": "tool_use", "tool": "Grep"},
        {"type": "tool_result", "call_id": "c2", "output": "text"},
        {"type": "tool_result", "call_id": "c1", "output": "ok"},
        {"type": "tool_result", "output": "match"},
        {"type": "tool_result", "tool": "Own", "call_id": "c3", "output": "named"},
    ]
    sent = [m for line in lines for m in feed(parser, line)]
    named = [m.tool for m in as_transcribed(sent) if m.type is MessageType.TOOL_RESULT]
    assert named == ["Read", "Bash", "Grep", "Own"]
