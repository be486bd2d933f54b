"""The OpenClaw parser, on output of its documented format: the pretty-printed answer
document of `openclaw agent --json` (2026.5.5), or line events."""

from __future__ import annotations

from pathlib import Path

from backends.base import MessageType, RunSpec, RunStatus, Usage
from backends.claude.failure import AUTH
from backends.openclaw import OpenclawBackend
from backends.openclaw.output import NO_OUTPUT, OpenclawParser
from tests.backends.support import feed_file, of_type

FIXTURES = Path(__file__).parents[2] / "fixtures" / "openclaw"


def test_the_answer_document_is_the_result_once_its_last_brace_arrives() -> None:
    """The document, many lines long, becomes text and a result on its closing line (so an
    OpenClaw that does not exit is stopped by the exit grace), with session, model, usage."""
    parser = OpenclawParser("main", "multica-1")
    lines = (FIXTURES / "answer.json").read_text().splitlines()
    steps = [parser.feed(line) for line in lines]
    assert all(not s.messages for s in steps[:-1])
    (final,) = of_type(steps, MessageType.RESULT)
    assert final.output == "The build passes." and final.session_id == "multica-17"
    result = parser.finish(None, "")
    assert result.status is RunStatus.COMPLETED and result.output == "The build passes."
    assert result.usage == (Usage("openclaw", "anthropic/claude-opus-4.7", 3462, 6, 120, 4648),)


def test_noise_before_the_document_is_skipped() -> None:
    """A banner line before the document does not hide it."""
    parser = OpenclawParser()
    parser.feed("[plugins] loaded 3")
    for line in (FIXTURES / "answer.json").read_text().splitlines():
        parser.feed(line)
    assert parser.finish(0, "").output == "The build passes."


def test_line_events_are_read_as_they_come() -> None:
    """A tool's use and result, text, step usage; the run completes on exit 0."""
    parser = OpenclawParser("agent-a")
    steps = feed_file(parser, FIXTURES / "events.jsonl")
    assert [m.tool for m in of_type(steps, MessageType.TOOL_USE)] == ["exec"]
    assert [m.output for m in of_type(steps, MessageType.TOOL_RESULT)] == ["ok"]
    result = parser.finish(0, "")
    assert result.output == "Built." and result.session_id == "oc-1"
    assert result.usage == (Usage("openclaw", "agent-a", 10, 2, 0, 0),)


def test_a_lifecycle_error_fails_the_run_by_its_words() -> None:
    """`lifecycle` with phase `error` fails the run; a 403 is an access failure."""
    parser = OpenclawParser()
    feed_file(parser, FIXTURES / "lifecycle-error.jsonl")
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED and result.failure_reason == AUTH


def test_plain_text_is_the_answer_and_nothing_fails() -> None:
    """Text without JSON completes with that text; no output at all fails, named."""
    parser = OpenclawParser()
    parser.feed("Done, see the diff.")
    assert parser.finish(0, "").output == "Done, see the diff."
    empty = OpenclawParser().finish(0, "")
    assert empty.status is RunStatus.FAILED and empty.error == NO_OUTPUT


def test_argv_names_the_session_agent_and_puts_the_brief_before_the_prompt() -> None:
    """`agent --local --json`, the daemon's session id, the model as `--agent` (unless the
    arguments name one), the daemon's flags dropped, the brief in the message."""
    backend = OpenclawBackend(args=["--model", "x", "--thinking", "low"])
    spec = RunSpec(prompt="Fix it.", workdir=Path("/w"), env={}, model="coder", instructions="B")
    assert backend.argv(spec, "multica-9") == [
        "openclaw", "agent", "--local", "--json", "--session-id", "multica-9",
        "--agent", "coder", "--thinking", "low", "--message", "B\n\nFix it.",
    ]  # fmt: skip
    named = RunSpec(prompt="p", workdir=Path("/w"), env={}, model="m", extra_args=["--agent=z"])
    assert "m" not in backend.argv(named, "s")
