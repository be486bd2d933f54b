"""What every JSON-lines parser does with output it does not recognise: a run of nothing else
fails as `agent_error.unknown` naming the CLI, its version and the first such line; one unknown
event among known ones is a counted log line."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from backends.base import MessageType, RunStatus
from backends.claude.stream import ClaudeStreamParser
from backends.codex.events import CodexEventParser
from backends.json_lines import UNRECOGNISED_REASON, JsonLinesParser

PARSERS: dict[str, Callable[[], JsonLinesParser]] = {
    "claude": lambda: ClaudeStreamParser(version="2.1.400"),
    "codex": lambda: CodexEventParser("gpt-5", version="2.1.400"),
}
NEW_SHAPE = [
    json.dumps({"kind": "session.open", "id": "s1"}),
    json.dumps({"kind": "chunk", "text": "Hello"}),
]


@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_a_run_of_only_unknown_events_fails_naming_cli_version_and_line(cli: str) -> None:
    """Events of a shape the parser does not know, then a clean exit: no empty success, but
    `agent_error.unknown` with the CLI, its version and the first line in the error."""
    parser = PARSERS[cli]()
    steps = [parser.feed(line) for line in NEW_SHAPE]
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED
    assert result.failure_reason == UNRECOGNISED_REASON
    assert f"{cli} 2.1.400" in result.error
    assert NEW_SHAPE[0] in result.error and NEW_SHAPE[1] not in result.error
    marked = [m.unrecognised for s in steps for m in s.messages]
    assert marked == NEW_SHAPE


@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_a_run_of_only_plain_text_fails_naming_the_first_line(cli: str) -> None:
    """A CLI that stopped printing JSON fails the same way; its lines are shown, marked."""
    parser = PARSERS[cli]()
    step = parser.feed("Welcome to the new interactive mode!")
    parser.feed("Goodbye.")
    assert step.invalid
    assert [m.unrecognised for m in step.messages] == ["Welcome to the new interactive mode!"]
    result = parser.finish(0, "")
    assert result.failure_reason == UNRECOGNISED_REASON
    assert "Welcome to the new interactive mode!" in result.error


def test_plain_text_and_a_failed_exit_keep_the_parsers_own_ending() -> None:
    """Only plain text, then a non-zero exit: a crash or a refusal more likely than a new
    format, so the ending is the parser's own (its stderr tail for the text rules)."""
    parser = ClaudeStreamParser(version="2.1.400")
    parser.feed("Invalid API key")
    result = parser.finish(1, "Please run /login")
    assert result.status is RunStatus.FAILED and result.failure_reason != UNRECOGNISED_REASON
    assert "Please run /login" in result.error


def test_the_stderr_tail_is_in_the_error() -> None:
    """What the CLI said on stderr comes after the first unrecognised line."""
    parser = CodexEventParser("gpt-5", version="0.200.0")
    parser.feed(NEW_SHAPE[0])
    error = parser.finish(2, "deprecated flag --json").error
    assert error.endswith("; stderr: deprecated flag --json") and "codex 0.200.0" in error


def test_one_unknown_event_among_known_ones_is_a_log_line() -> None:
    """A new event type between known ones is logged (marked) and counted; the run completes."""
    parser = ClaudeStreamParser(version="2.1.400")
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s1"},
        {"type": "thought_summary", "text": "new in this version"},
        {"type": "result", "subtype": "success", "is_error": False, "result": "done"},
    ]
    steps = [parser.feed(json.dumps(line)) for line in lines]
    (unknown,) = steps[1].messages
    assert unknown.type is MessageType.LOG and unknown.unrecognised == json.dumps(lines[1])
    assert (parser.recognised, parser.unrecognised) == (2, 1)
    result = parser.finish(0, "")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")


SILENT_RUN = [
    {"type": "system", "subtype": "init", "session_id": "s1"},
    {"type": "assistant_chunk", "text": "the answer, in an event not known here"},
    {"type": "result", "subtype": "success", "is_error": False, "result": ""},
]
"""Known events around an unknown one that carried the answer: the run ends with no output."""


@pytest.mark.parametrize(
    ("version", "ends"),
    [
        ("2.1.400 (Claude Code)", RunStatus.FAILED),
        ("2.1.332 (Claude Code)", RunStatus.COMPLETED),
        ("2.1.328 (Claude Code)", RunStatus.COMPLETED),
        ("", RunStatus.COMPLETED),
    ],
    ids=["above-tested", "newest-tested", "older", "version-unknown"],
)
def test_an_untested_version_with_unknown_events_and_no_output_fails(
    version: str, ends: RunStatus
) -> None:
    """Above the newest tested version, unknown events and an empty completion fail as
    `agent_error.unknown` naming the CLI, its version and the first unknown line; within the
    tested range (or with no version to compare) the run completes as before."""
    parser = ClaudeStreamParser(version=version, tested_max="2.1.332")
    for line in SILENT_RUN:
        parser.feed(json.dumps(line))
    result = parser.finish(0, "")
    assert result.status is ends
    if ends is RunStatus.FAILED:
        assert result.failure_reason == UNRECOGNISED_REASON and result.session_id == "s1"
        assert "claude 2.1.400 (Claude Code)" in result.error and "2.1.332" in result.error
        assert json.dumps(SILENT_RUN[1]) in result.error
    else:
        assert (result.failure_reason, result.output) == ("", "")


def test_an_untested_version_that_answered_completes() -> None:
    """Above the tested range an unknown event beside an answer is still only a log line."""
    parser = CodexEventParser("gpt-5", version="codex-cli 0.200.0", tested_max="0.171.0")
    for line in [
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.thinking", "text": "new in this version"},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "done"}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]:
        parser.feed(json.dumps(line))
    result = parser.finish(0, "")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")


def test_plain_text_after_a_known_event_is_skipped_as_before() -> None:
    """Once the parser knows the CLI, a stray non-JSON line is counted invalid, not shown."""
    parser = CodexEventParser("gpt-5")
    parser.feed(json.dumps({"type": "thread.started", "thread_id": "t1"}))
    step = parser.feed("warning: something")
    assert step.invalid and not step.messages
    assert parser.finish(0, "").failure_reason != UNRECOGNISED_REASON


def test_a_long_line_is_quoted_cut() -> None:
    """The error quotes a few hundred characters of the line, not all of it."""
    parser = ClaudeStreamParser()
    parser.feed(json.dumps({"kind": "x" * 5000}))
    error = parser.finish(0, "").error
    assert "claude (version unknown)" in error and len(error) < 600
