"""How a task ended: why its run stopped, and the one outcome (with its report) that follows."""

from __future__ import annotations

from dataclasses import dataclass, replace

from backends.base import Message, RunResult, RunStatus, Usage
from daemon.protocol.failure import failure_reason, known_reason
from daemon.protocol.reports import TerminalReport, UsageEntry
from daemon.times import format_duration


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a task ended: the status counted in metrics, and the report the server gets (None:
    the server settled the task itself, so nothing is said)."""

    status: RunStatus
    report: TerminalReport | None
    usage: tuple[UsageEntry, ...] = ()
    limit_resets: str = ""
    """When the provider limit that failed the run lifts, in the agent's words."""

    @property
    def failure_reason(self) -> str:
        """The report's short failure name ("" when the task did not fail)."""
        return self.report.failure_reason if self.report is not None else ""

    def without_session(self) -> Outcome:
        """This outcome with its session withheld: the agent's Codex thread never reached the
        disk, so no later run could resume it (the server hears that instead)."""
        if self.report is None or not self.report.session_id:
            return self
        update = {"session_id": "", "session_rollout_missing": True}
        return replace(self, report=self.report.model_copy(update=update))

    def delivered(self, branch: str, durable_work_dir: str, error: str = "") -> Outcome:
        """This outcome with where a local directory's worktree left the work: its branch
        and the folder that replaces the removed worktree. `error`: the worktree had to be
        kept (its work could not be committed, or it could not be removed), which fails a
        completed task and is said on a cancel too: it names where the work is."""
        report = self.report
        if report is None or not (branch or durable_work_dir or error):
            return self
        update: dict[str, str] = {"branch_name": branch, "durable_work_dir": durable_work_dir}
        status = self.status
        if error and report.kind == "complete":
            kept = report.model_dump(include={"session_id", "work_dir", "retired_session_id"})
            failed = TerminalReport(
                kind="fail", error=error, failure_reason=LOCAL_DIRECTORY, **kept
            )
            return replace(self, status=RunStatus.FAILED, report=failed.model_copy(update=update))
        if error and report.kind == "fail":
            update["error"] = f"{report.error}\n{error}"
        elif error:
            update |= {"error": error, "failure_reason": LOCAL_DIRECTORY}
        return replace(self, status=status, report=report.model_copy(update=update))


LOCAL_DIRECTORY = "local_directory_error"


@dataclass(frozen=True, slots=True)
class Ending:
    """Why a task's run stopped, everything `outcome_of` needs and nothing else.

    Exactly one of these holds: `stopped` (who interrupted the run), `wall_clock` (the cap in
    seconds that struck), `error` (the run failed before or instead of an agent's answer), or
    the last attempt's `final` message and `result`.
    """

    session_id: str = ""
    stopped: str = ""
    wall_clock: float = 0.0
    error: str = ""
    failure_reason: str = ""
    """A `failure_reason` for `error`: a taxonomy value, `idle_watchdog`, or "" to classify."""
    final: Message | None = None
    result: RunResult | None = None
    usage: tuple[Usage, ...] = ()
    """What the agent spent before it was stopped, when no result says it."""
    retired_session: str = ""
    """A session the run was told to resume and the agent could not: it started afresh."""


def outcome_of(ending: Ending, work_dir: str) -> Outcome:
    """The one place a run's outcome is decided."""
    session = ending.session_id
    spent = ending.result.usage if ending.result is not None else ending.usage
    usage = tuple(UsageEntry.from_usage(u) for u in spent)

    # On every complete and fail, the completed ones too: a fresh session that succeeded is
    # exactly when the abandoned one would otherwise stay the session to resume.
    retired = ending.retired_session

    def fail(status: RunStatus, error: str, reason: str, resets: str = "") -> Outcome:
        report = TerminalReport(
            kind="fail",
            error=error,
            failure_reason=reason,
            session_id=session,
            work_dir=work_dir,
            retired_session_id=retired,
        )
        return Outcome(status, report, usage, resets)

    if ending.stopped == "shutdown":
        error = "the daemon shut down before the task finished"
        return fail(RunStatus.CANCELLED, error, "cancelled")
    if ending.stopped:
        ack = TerminalReport(kind="cancel_ack") if ending.stopped == "server_cancelled" else None
        return Outcome(RunStatus.CANCELLED, ack, usage)
    final, result = ending.final, ending.result
    answered = final is not None and not final.is_error
    if ending.wall_clock and not answered:
        limit = format_duration(ending.wall_clock)
        return fail(RunStatus.TIMEOUT, f"task exceeded the wall-clock limit of {limit}", "timeout")
    if ending.error:
        watchdog = ending.failure_reason == "idle_watchdog"
        status = RunStatus.IDLE_WATCHDOG if watchdog else RunStatus.FAILED
        return fail(status, ending.error, known_reason(ending.failure_reason, ending.error))
    if result is None or ending.wall_clock:
        # The agent sent its final result but was killed during the exit grace or at the wall
        # clock: the run still counts with the result it sent.
        assert final is not None
        if final.is_error:
            error = final.content or final.output or "agent reported an error"
            return fail(RunStatus.FAILED, error, known_reason("", error))
        session = final.session_id or session
        return _completed(final.output or final.content, session, work_dir, final.usage, retired)
    session = result.session_id or session
    if result.status is RunStatus.COMPLETED:
        return _completed(result.output, session, work_dir, result.usage, retired)
    error = result.error or "agent failed"
    # A generic failure is named from the agent's own fields first, then its error text.
    reason = failure_reason(result.status) or known_reason(result.failure_reason, error)
    return fail(RunStatus.FAILED, error, reason, result.limit_resets)


def _completed(
    output: str, session: str, work_dir: str, usage: tuple[Usage, ...], retired: str
) -> Outcome:
    report = TerminalReport(
        kind="complete",
        output=output,
        session_id=session,
        work_dir=work_dir,
        retired_session_id=retired,
    )
    return Outcome(RunStatus.COMPLETED, report, tuple(UsageEntry.from_usage(u) for u in usage))
