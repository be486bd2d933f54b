"""What every parser of an agent CLI printing one JSON object per line shares.

Claude Code and Codex print JSON lines, and so do the CLIs a backend may add next (OpenCode's
`--format json`, an ACP agent's JSON-RPC). Their lines are untrusted: not JSON, not an object,
a field missing or of another type. A parser built on `JsonLinesParser` handles the line and
reads fields with `str_field` and `int_field`, so none of that is written twice:

* `JsonLinesParser` — a blank line yields nothing, a line that is no JSON object is counted
  invalid and skipped, every object goes to the parser's `event`; it keeps the session being
  resumed and whether the CLI said it does not know it (what `backends.resume` acts on);
* `json_object`, `str_field`, `int_field` — an object from a line, a field of the wanted type;
* `ended_early` — the failed result of a process that ended before its final event.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json

from backends.base import ParseStep, RunResult, RunStatus


class JsonLinesParser:
    """The common part of a `LineParser` for a CLI printing one JSON object per line."""

    missing_session_markers: tuple[str, ...] = ()
    """What the CLI prints when the session to resume does not exist."""

    def __init__(self, resuming: str = "") -> None:
        self.resuming = resuming
        self.session_not_found = False

    def feed(self, line: str) -> ParseStep:
        """Parse one stdout line; invalid JSON is reported as such and otherwise skipped."""
        if not line.strip():
            return ParseStep()
        event = json_object(line)
        if event is None:
            return ParseStep(invalid=True)
        return self.event(event)

    def event(self, event: dict[str, Any]) -> ParseStep:
        """Parse one JSON object the CLI printed (each parser says what its events mean)."""
        raise NotImplementedError

    def says_session_missing(self, text: str) -> bool:
        """Whether `text` is the CLI saying the session to resume does not exist."""
        return any(marker in text for marker in self.missing_session_markers)


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
