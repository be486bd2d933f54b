"""What every parser of an agent CLI printing one JSON object per line shares.

Claude Code and Codex print JSON lines, and so do the CLIs a backend may add next (OpenCode's
`--format json`, an ACP agent's JSON-RPC). Their lines are untrusted: not JSON, not an object,
a field missing or of another type. A parser built on `JsonLinesParser` handles the line and
reads fields with `str_field` and `int_field`, so none of that is written twice:

* `JsonLinesParser` — a blank line yields nothing, a line that is no JSON object is counted
  invalid and skipped, every object goes to the parser's `event`; it keeps the session being
  resumed and whether the CLI said it does not know it (what `backends.resume` acts on);
* what it does not recognise — an event the parser calls `unknown`, a line that is no JSON
  object — is counted and the first such line kept. One unknown event among known ones is a
  log line in the transcript; a run in which nothing at all was recognised fails as
  `agent_error.unknown`, naming the CLI, its version and that line (`unrecognised_error`): a CLI
  upgrade that changed the output must never look like an empty success (plain text alone
  with a failed exit is left to the parser's own ending: a crash or a refusal, most likely).
  A CLI newer than the newest version the tests run (`tested_max`) is held to more: a run with
  unknown events that would end as an empty completion fails the same way, since the answer
  is most likely in the events the parser skipped;
  The messages made of such lines carry the line (`Message.unrecognised`), so the daemon can
  tell, within the first-output budget, a CLI that speaks from one whose words it does not know;
* `json_object`, `str_field`, `int_field` — an object from a line, a field of the wanted type;
* `ended_early` — the failed result of a process that ended before its final event.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic_core import from_json

from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.version import parse_version, version_at_least

UNRECOGNISED_REASON = "agent_error.unknown"
"""The `failure_reason` of a run whose output the parser did not recognise at all."""
_LINE_LIMIT = 300
"""How much of an unrecognised line an error quotes (it may be long, it may hold a secret)."""


class JsonLinesParser:
    """The common part of a `LineParser` for a CLI printing one JSON object per line."""

    cli = ""
    """The CLI's name, as errors name it."""
    missing_session_markers: tuple[str, ...] = ()
    """What the CLI prints when the session to resume does not exist."""

    def __init__(
        self, resuming: str = "", version: str = "", tested_max: str = "", *, model: str = ""
    ) -> None:
        """`version` is what the CLI last answered to `--version` (named in errors);
        `tested_max` is the newest version the project's tests run ("" = no ceiling); `model`
        is the one usage is reported under when the CLI names none."""
        self.resuming = resuming
        self.model = model
        self.session_id = ""
        """The session the CLI named for this run ("" until it names one)."""
        self.version = version
        self.tested_max = tested_max
        self.session_not_found = False
        self.recognised = 0
        """Lines the parser knew."""
        self.unrecognised = 0
        """Lines it did not: an event of an unknown type, a line that is no JSON object."""
        self.first_unrecognised = ""
        self._unknown_events = 0
        self._line = ""
        self._known = True

    def feed(self, line: str) -> ParseStep:
        """Parse one stdout line; invalid JSON is reported as such and otherwise skipped."""
        if not line.strip():
            return ParseStep()
        event = json_object(line)
        if event is None and self.resuming and self.says_session_missing(line):
            # Said on stdout by some versions (Pi before 0.73, some of them), on stderr by
            # others: either way the CLI's refusal to resume, and the run starts fresh.
            self.session_not_found = True
            return ParseStep()
        if event is None:
            quoted = self._note_unrecognised(line)
            if self.recognised:
                return ParseStep(invalid=True)
            # Nothing recognised yet: the line may be the CLI's new output format, so the
            # daemon is shown it (it stays out of the activity the watchdog counts).
            said = Message(
                MessageType.LOG, content=f"{self.cli} printed: {quoted}", unrecognised=quoted
            )
            return ParseStep(messages=[said], invalid=True)
        self._line, self._known = line, True
        step = self.event(event)
        if self._known:
            self.recognised += 1
        return step

    def event(self, event: dict[str, Any]) -> ParseStep:
        """Parse one JSON object the CLI printed (each parser says what its events mean)."""
        raise NotImplementedError

    def unknown(self, what: str) -> ParseStep:
        """The step for an event this parser does not know: a log line saying `what`, marked
        with the line; the line is counted (and kept, if it is the first)."""
        self._known = False
        self._unknown_events += 1
        quoted = self._note_unrecognised(self._line)
        return ParseStep(messages=[Message(MessageType.LOG, content=what, unrecognised=quoted)])

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result; a run of which nothing was recognised failed, whatever it said."""
        # Plain text and a failed exit is more likely a crash or a refusal (a bad key) than a
        # new format: left to the parser's own ending, whose stderr tail the text rules name.
        new_format = self._unknown_events or (self.unrecognised and exit_code == 0)
        if not self.recognised and new_format:
            why = f"none of its {self.unrecognised} output lines was recognised"
            error = unrecognised_error(self.cli, self.version, self.first_unrecognised, why)
            tail = stderr_tail.strip()
            return RunResult(
                RunStatus.FAILED,
                error=f"{error}; stderr: {tail}" if tail else error,
                exit_code=exit_code,
                failure_reason=UNRECOGNISED_REASON,
            )
        result = self.result(exit_code, stderr_tail)
        if self._unknown_events and self._silent(result) and self._untested():
            # Within the tested range an unknown event is a novelty beside the answer; above
            # it, with no answer at all, it is most likely where the answer went.
            why = (
                f"{self._unknown_events} of its events were not recognised and the run "
                f"ended with no output (the newest version tested is {self.tested_max})"
            )
            error = unrecognised_error(self.cli, self.version, self.first_unrecognised, why)
            return replace(
                result, status=RunStatus.FAILED, error=error, failure_reason=UNRECOGNISED_REASON
            )
        return result

    @staticmethod
    def _silent(result: RunResult) -> bool:
        return result.status is RunStatus.COMPLETED and not result.output.strip()

    def _untested(self) -> bool:
        """Whether the CLI's version is above the newest one the tests run."""
        ceiling = self.tested_max
        return bool(ceiling) and not version_at_least(ceiling, parse_version(self.version))

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result from what the parser recognised (each parser says how)."""
        raise NotImplementedError

    def _note_unrecognised(self, line: str) -> str:
        quoted = quote_line(line)
        self.unrecognised += 1
        if not self.first_unrecognised:
            self.first_unrecognised = quoted
        return quoted

    def says_session_missing(self, text: str) -> bool:
        """Whether `text` is the CLI saying the session to resume does not exist."""
        return any(marker in text for marker in self.missing_session_markers)


def quote_line(line: str) -> str:
    """A line as an error quotes it: stripped, cut to a few hundred characters."""
    text = line.strip()
    return text if len(text) <= _LINE_LIMIT else text[:_LINE_LIMIT] + "…"


def unrecognised_error(cli: str, version: str, line: str, why: str) -> str:
    """The error of a run whose output was not recognised: the CLI, its version, `why`, and
    the first line that was not."""
    who = f"{cli or 'the agent CLI'} {version or '(version unknown)'}"
    return f"{who}: {why}; its output format may have changed (first unrecognised line: {line})"


def json_object(line: str) -> dict[str, Any] | None:
    """The line as a JSON object, or None when it is not one (agents' lines are untrusted)."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        # pydantic-core's parser: several times faster than json.loads on the drain's hot path.
        value = from_json(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def str_field(value: Any) -> str:
    """A JSON field that should be a string: itself, or "" for anything else."""
    return value if isinstance(value, str) else ""


def int_field(value: Any) -> int:
    """A JSON field that should be an integer: itself, or 0 (a bool is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def ended_early(
    agent: str,
    what: str,
    exit_code: int | None,
    stderr_tail: str,
    output: str = "",
    session_id: str = "",
) -> RunResult:
    """A failed result for an agent that stopped before `what` (its final event) arrived."""
    how = "was stopped" if exit_code is None else f"exited with code {exit_code}"
    error = f"{agent} {how} before {what}"
    tail = stderr_tail.strip()
    return RunResult(
        RunStatus.FAILED,
        output=output,
        error=f"{error}; stderr: {tail}" if tail else error,
        session_id=session_id,
        exit_code=exit_code,
    )


class EndsWithUsage:
    """For a parser whose usage is a method of its own: its `RunResult` built in one place,
    with the run's session and usage beside what it ended as."""

    session_id: str

    def usage(self) -> tuple[Usage, ...]:
        """The run's usage (the parser's own reading)."""
        raise NotImplementedError

    def result_of(
        self,
        status: RunStatus,
        exit_code: int | None,
        *,
        output: str = "",
        error: str = "",
        reason: str = "",
        session_id: str | None = None,
    ) -> RunResult:
        """The run's result: what it ended as, with its session and usage so far."""
        return RunResult(
            status,
            output=output,
            error=error,
            session_id=self.session_id if session_id is None else session_id,
            usage=self.usage(),
            exit_code=exit_code,
            failure_reason=reason,
        )

    def result_message(self, output: str) -> Message:
        """The run's final answer as the drain loop takes it: its session and usage."""
        return Message(
            MessageType.RESULT,
            content=output,
            output=output,
            session_id=self.session_id,
            usage=self.usage(),
        )
