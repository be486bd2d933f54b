"""How a task ended, and the terminal report that tells the server."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from backends.base import Message, RunResult, RunStatus, Usage


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a task ended, as reported to the server."""

    status: RunStatus
    output: str = ""
    error: str = ""
    failure_reason: str = ""
    session_id: str = ""
    usage: tuple[Usage, ...] = ()
    report: bool = True
    cancel_ack: bool = False


def failed(error: str, session_id: str = "", reason: str = "agent_error") -> Outcome:
    """A failure reported with `failure_reason` (default `agent_error`)."""
    return Outcome(RunStatus.FAILED, error=error, failure_reason=reason, session_id=session_id)


def from_result(result: RunResult | None, final: Message | None, session_id: str) -> Outcome:
    """The outcome of an attempt that ran to its end (no watchdog, no stop)."""
    if result is None:
        # The agent sent its final result but had to be killed during the exit grace: the run
        # still counts with the result it sent.
        assert final is not None
        if final.is_error:
            return failed(final.content or final.output or "agent reported an error", session_id)
        return Outcome(
            RunStatus.COMPLETED,
            output=final.output or final.content,
            session_id=final.session_id or session_id,
            usage=final.usage,
        )
    session_id = result.session_id or session_id
    if result.status is RunStatus.COMPLETED:
        return Outcome(
            RunStatus.COMPLETED, output=result.output, session_id=session_id, usage=result.usage
        )
    reason = "timeout" if result.status is RunStatus.TIMEOUT else "agent_error"
    return replace(failed(result.error or "agent failed", session_id, reason), usage=result.usage)


def stopped(reason: str, session_id: str) -> Outcome:
    """A run interrupted by the daemon's shutdown (reported) or by the server (not reported)."""
    if reason == "shutdown":
        return Outcome(
            RunStatus.CANCELLED,
            error="the daemon shut down before the task finished",
            failure_reason="cancelled",
            session_id=session_id,
        )
    return Outcome(
        RunStatus.CANCELLED,
        report=False,
        cancel_ack=reason == "server_cancelled",
        session_id=session_id,
    )


def terminal_call(outcome: Outcome, work_dir: str) -> tuple[str, dict[str, Any]]:
    """The terminal call (`complete`, `fail`, `cancel_ack`, or `""` for none) and its body."""
    if outcome.cancel_ack:
        return "cancel_ack", {}
    if not outcome.report:
        return "", {}
    if outcome.status is RunStatus.COMPLETED:
        return "complete", {
            "output": outcome.output,
            "session_id": outcome.session_id,
            "work_dir": work_dir,
        }
    return "fail", {
        "error": outcome.error,
        "failure_reason": outcome.failure_reason,
        "session_id": outcome.session_id,
        "work_dir": work_dir,
    }
