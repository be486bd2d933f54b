"""The Pi `--mode json` parser, on transcripts recorded from the real CLI (0.73.1) against the
fake Chat Completions API (tests/fakes/chat_api.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import MessageType, ParseStep, RunStatus, Usage
from backends.claude.failure import AUTH, CAPACITY, CONTEXT, MODEL, QUOTA, SERVER
from backends.json_lines import UNRECOGNISED_REASON
from backends.pi.events import PiEventParser
from tests.backends.support import feed_file, messages, of_type
from tests.fakes.chat_api import MODEL as FAKE_MODEL
from tests.fakes.chat_api import USAGE

FIXTURES = Path(__file__).parents[2] / "fixtures" / "pi"
# Pi counts input without the cached tokens, as the daemon reports it.
ONE_REQUEST = Usage(
    "pi",
    FAKE_MODEL,
    input_tokens=USAGE["prompt_tokens"] - USAGE["cached_tokens"],
    output_tokens=USAGE["completion_tokens"],
    cache_read_tokens=USAGE["cached_tokens"],
)


def replay(name: str, resuming: str = "") -> tuple[PiEventParser, list[ParseStep]]:
    parser = PiEventParser("configured-model", resuming=resuming, version="0.73.1")
    return parser, feed_file(parser, FIXTURES / f"{name}.jsonl")


def test_answer_completes_with_its_text_session_and_usage() -> None:
    """An answer: the session status first, the text once (whole, not per delta), and a
    completed result with the session id and the fake model's usage."""
    parser, steps = replay("text")
    status = messages(steps)[0]
    assert status.type is MessageType.STATUS and status.session_id == parser.session_id != ""
    assert [m.content for m in of_type(steps, MessageType.TEXT)] == ["All done here."]
    assert not any(step.invalid for step in steps)
    # The final result, as the run's end: the daemon waits its exit grace from here.
    (final,) = of_type(steps, MessageType.RESULT)
    assert (final.output, final.session_id, final.usage) == (
        "All done here.",
        parser.session_id,
        (ONE_REQUEST,),
    )
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED, result
    assert result.output == "All done here."
    assert result.session_id == parser.session_id
    assert result.usage == (ONE_REQUEST,)


def test_reasoning_is_thinking_before_the_answer() -> None:
    """A reasoning block becomes one thinking message; the output is the text alone."""
    parser, steps = replay("reasoning")
    kinds = [m.type for m in messages(steps) if m.type is not MessageType.STATUS]
    assert kinds == [MessageType.THINKING, MessageType.TEXT, MessageType.RESULT]
    assert of_type(steps, MessageType.THINKING)[0].content == "Let me think."
    assert parser.finish(0, "").output == "Thought it through."


def test_a_tool_is_in_flight_from_its_start_to_its_end() -> None:
    """The shell call is a tool_use when it starts (before its partial output), a
    tool_result with its output when it ends; usage adds up both model calls."""
    parser, steps = replay("shell")
    tools = [
        m for m in messages(steps) if m.type in (MessageType.TOOL_USE, MessageType.TOOL_RESULT)
    ]
    use, done = tools
    assert use.type is MessageType.TOOL_USE and use.tool == "bash"
    assert use.input is not None and use.input["command"] == "sleep 1 && echo slept"
    assert done.call_id == use.call_id != "" and done.output == "slept\n" and not done.is_error
    # Nothing between the start and the end of the tool: its updates are no messages.
    lines = (FIXTURES / "shell.jsonl").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "tool_execution_start" in line)
    end = next(i for i, line in enumerate(lines) if "tool_execution_end" in line)
    assert steps[start].messages == [use] and steps[end].messages == [done]
    assert all(not step.messages for step in steps[start + 1 : end])
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.output == "Slept well."
    doubled = Usage(
        "pi",
        FAKE_MODEL,
        2 * ONE_REQUEST.input_tokens,
        2 * ONE_REQUEST.output_tokens,
        2 * ONE_REQUEST.cache_read_tokens,
    )
    assert result.usage == (doubled,)


def test_a_failed_command_is_an_error_result_and_the_run_goes_on() -> None:
    """A command that exits non-zero is a tool_result marked as an error; the run completes."""
    parser, steps = replay("shell-fails")
    (done,) = of_type(steps, MessageType.TOOL_RESULT)
    assert done.is_error and "oops" in done.output
    assert parser.finish(0, "").status is RunStatus.COMPLETED


@pytest.mark.parametrize("name", ["stall", "tool-then-stall"])
def test_a_run_cut_before_its_end_failed(name: str) -> None:
    """A run killed before `agent_end` (a stalled stream) failed, whatever it printed; what
    it spent so far is still reported."""
    parser, _ = replay(name)
    result = parser.finish(None, "")
    assert result.status is RunStatus.FAILED
    assert "before the agent ended" in result.error
    assert result.usage == ((ONE_REQUEST,) if name == "tool-then-stall" else ())


def test_an_error_pi_recovered_from_by_retrying_is_no_failure() -> None:
    """500s and then an answer: Pi's retry is logged, the run completes (its one result
    after the retry)."""
    parser, steps = replay("recovered")
    (final,) = of_type(steps, MessageType.RESULT)
    assert final.output == "Recovered."
    (retry,) = [m for m in of_type(steps, MessageType.LOG) if "retry" in m.content]
    assert "500 fake server scripted error" in retry.content
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED, result
    assert result.output == "Recovered."


@pytest.mark.parametrize(
    ("name", "reason", "said"),
    [
        ("rate-limit", CAPACITY, "429 Rate limit reached"),
        ("error-500", SERVER, "500 fake server scripted error"),
        ("quota", QUOTA, "exceeded your current quota"),
        ("bad-key", AUTH, "401 Incorrect API key"),
        ("no-model", MODEL, "404 The model"),
        ("context", CONTEXT, "maximum context length"),
    ],
)
def test_a_provider_failure_fails_the_run_with_its_reason(
    name: str, reason: str, said: str
) -> None:
    """Pi exits 0 after a turn it could not complete (retries spent, or none tried): the run
    failed, named from the provider's error."""
    parser, steps = replay(name)
    assert of_type(steps, MessageType.RESULT) == []  # the turn failed: Pi may retry it
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED, result
    assert said in result.error
    assert result.failure_reason == reason
    assert result.session_id == parser.session_id != ""


@pytest.mark.parametrize(
    ("name", "stderr", "reason"),
    [
        (
            "no-api-key",
            "No API key found for the selected model.\n\nUse /login to log into a provider",
            AUTH,
        ),
        (
            None,
            'Error: Model "nope/nope" not found. Use --list-models to see available models.',
            MODEL,
        ),
    ],
)
def test_pis_own_refusal_before_any_turn_is_named(
    name: str | None, stderr: str, reason: str
) -> None:
    """Pi refuses to start a turn (no key for the model; a model it does not know) on stderr
    and exits 1: the run failed early, named from those words."""
    parser, _ = replay(name) if name else (PiEventParser("m"), [])
    result = parser.finish(1, stderr)
    assert result.status is RunStatus.FAILED
    assert stderr.splitlines()[0] in result.error
    assert result.failure_reason == reason


def test_resuming_the_same_session_is_no_fresh_one() -> None:
    """A resumed run's header names the session asked for: no fresh-session notice."""
    parser, steps = replay("resume", resuming="01a219c1-b3c8-718e-991e-a00db59f674f")
    assert not any("fresh" in m.content for m in messages(steps))
    assert parser.finish(0, "").session_id == "01a219c1-b3c8-718e-991e-a00db59f674f"


@pytest.mark.parametrize(
    "stderr",
    [
        "No session found matching '01a219c9'",
        "Session found in different project: /tmp/pi/other\n"
        "Fork this session into current directory? [y/N] ",
    ],
)
def test_a_session_pi_cannot_resume_here_is_reported_missing(stderr: str) -> None:
    """Pi refuses the session (none, or another directory's) before any event: the parser
    says the session is missing, so the backend starts a fresh one."""
    parser = PiEventParser("m", resuming="01a219c9")
    result = parser.finish(1, stderr)
    assert parser.session_not_found
    assert result.status is RunStatus.FAILED


def test_the_refusal_printed_on_stdout_by_older_versions_is_one_too() -> None:
    """Pi 0.60 and 0.65 print the other directory's session on stdout, and exit 0: it is the
    same refusal (a fresh session follows), not output of a new format."""
    parser = PiEventParser("m", resuming="01a219c9")
    step = parser.feed("Session found in different project: /tmp/pi/other")
    result = parser.finish(0, "")
    assert parser.session_not_found and not step.invalid and not step.messages
    assert result.failure_reason != UNRECOGNISED_REASON


def test_a_missing_session_without_resuming_is_no_fallback() -> None:
    """The same words from a run that resumed nothing start no second run."""
    parser = PiEventParser("m")
    parser.finish(1, "No session found matching 'x'")
    assert not parser.session_not_found


def test_output_of_only_unknown_events_fails_as_unrecognised() -> None:
    """A Pi whose events all changed names fails as agent_error.unknown, naming itself."""
    parser = PiEventParser("m", version="9.0.0")
    steps = [parser.feed('{"type":"sessionStarted","id":"x"}'), parser.feed('{"type":"done"}')]
    assert all(s.messages[0].unrecognised for s in steps)
    result = parser.finish(0, "")
    assert result.failure_reason == UNRECOGNISED_REASON
    assert "pi 9.0.0" in result.error and "sessionStarted" in result.error


def test_an_error_event_fails_the_run() -> None:
    """An `error` event is shown and fails an otherwise finished run."""
    parser = PiEventParser("m")
    for line in (
        '{"type":"session","id":"s1"}',
        '{"type":"error","message":"Connection error."}',
        '{"type":"agent_end","messages":[]}',
    ):
        parser.feed(line)
    result = parser.finish(0, "")
    assert result.status is RunStatus.FAILED and result.error == "Connection error."
    assert result.failure_reason == "agent_error.provider_network"
