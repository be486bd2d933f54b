"""The DevEco Code parser, on output of its documented format (OpenCode's `run --format
json` events, which DevEco's engine prints), and its command line."""

from __future__ import annotations

from pathlib import Path

from backends.base import MessageType, RunSpec, RunStatus, Usage
from backends.claude.failure import AUTH
from backends.deveco import DevecoBackend
from backends.deveco.events import DevecoEventParser
from tests.backends.support import feed_file, of_type

FIXTURES = Path(__file__).parents[2] / "fixtures" / "deveco"
SESSION = "ses_3b1f9c2e7ffeXk2Q"


def test_a_finished_tool_is_its_use_and_result_and_usage_is_summed() -> None:
    """Each `tool_use` carries its end: use and result at once (an error's words as its
    output); the text is the answer; the steps' tokens add up."""
    parser = DevecoEventParser("glm-5")
    steps = feed_file(parser, FIXTURES / "shell.jsonl")
    uses, results = of_type(steps, MessageType.TOOL_USE), of_type(steps, MessageType.TOOL_RESULT)
    assert [(u.tool, u.call_id, dict(u.input or {})) for u in uses] == [
        ("bash", "call_a1", {"command": "ls"}),
        ("read", "call_a2", {"filePath": "/x"}),
    ]
    assert [(r.output, r.is_error) for r in results] == [
        ("a.ets\nb.ets\n", False),
        ("File not found: /x", True),
    ]
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.output == "Two ArkTS files."
    assert result.session_id == SESSION
    assert result.usage == (Usage("deveco", "glm-5", 2500, 52, 1700, 10),)


def test_an_error_event_fails_the_run_with_its_message() -> None:
    """`error.data.message` is the run's error, named by its status."""
    parser = DevecoEventParser()
    feed_file(parser, FIXTURES / "error.jsonl")
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED and result.failure_reason == AUTH
    assert result.error == "401 Incorrect API key provided"


def test_a_failed_exit_without_an_error_event_fails_with_stderr() -> None:
    """A crash says how it ended and what stderr said."""
    parser = DevecoEventParser()
    result = parser.finish(2, "Error: unknown flag --bogus")
    assert result.status is RunStatus.FAILED
    assert "exited with code 2" in result.error and "unknown flag" in result.error


def test_argv_runs_json_in_the_task_directory_with_the_prompt_last() -> None:
    """`run --format json`, the directory anchor, the model, the session, then the prompt;
    the daemon's flags are dropped from the configured arguments."""
    backend = DevecoBackend(args=["--format", "default", "--share"], model="m0")
    spec = RunSpec(prompt="Do it.", workdir=Path("/w/t2"), env={}, resume_session_id="s9")
    assert backend.argv(spec) == [
        "deveco", "run", "--format", "json", "--dangerously-skip-permissions",
        "--dir", "/w/t2", "--model", "m0", "--session", "s9", "--share", "Do it.",
    ]  # fmt: skip
