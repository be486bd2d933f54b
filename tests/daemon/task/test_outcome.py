"""How a run's ending becomes its one outcome and report, in the one place that decides it."""

from __future__ import annotations

from backends.base import Message, MessageType, RunResult, RunStatus, Usage
from daemon.protocol.reports import TerminalReport, UsageEntry
from daemon.task.outcome import Ending, outcome_of

USAGE = (Usage("anthropic", "sonnet", 1, 2),)


def result_message(output: str, *, is_error: bool = False, session: str = "") -> Message:
    return Message(
        MessageType.RESULT, output=output, is_error=is_error, session_id=session, usage=USAGE
    )


def test_completed_run_reports_complete_with_its_usage() -> None:
    """A clean exit reports `complete` with the output, session, work dir and usage."""
    result = RunResult(RunStatus.COMPLETED, output="done", session_id="s-2", usage=USAGE)
    outcome = outcome_of(Ending("s-1", final=result_message("done"), result=result), "/w")
    assert outcome.status is RunStatus.COMPLETED
    assert outcome.report == TerminalReport(
        kind="complete", output="done", session_id="s-2", work_dir="/w"
    )
    assert outcome.usage == (UsageEntry.from_usage(USAGE[0]),)


def test_answer_in_before_the_wall_clock_stands() -> None:
    """The wall clock striking during the exit grace keeps the agent's answer."""
    ending = Ending("s-1", wall_clock=60.0, final=result_message("answer", session="s-3"))
    outcome = outcome_of(ending, "/w")
    assert outcome.status is RunStatus.COMPLETED
    assert outcome.report is not None
    assert (outcome.report.output, outcome.report.session_id) == ("answer", "s-3")


def test_wall_clock_without_an_answer_is_a_timeout() -> None:
    """No answer (or an error answer) at the wall clock fails with reason `timeout`."""
    for final in (None, result_message("bad", is_error=True)):
        outcome = outcome_of(Ending("s-1", wall_clock=90.0, final=final), "/w")
        assert outcome.status is RunStatus.TIMEOUT
        assert outcome.report == TerminalReport(
            kind="fail",
            error="task exceeded the wall-clock limit of 1m30s",
            failure_reason="timeout",
            session_id="s-1",
            work_dir="/w",
        )


def test_stops_report_cancelled_ack_or_nothing() -> None:
    """Shutdown reports a `cancelled` failure, a server cancel an ack, anything else nothing."""
    shutdown = outcome_of(Ending("s", stopped="shutdown"), "/w")
    assert (shutdown.status, shutdown.failure_reason) == (RunStatus.CANCELLED, "cancelled")
    assert outcome_of(Ending(stopped="server_cancelled"), "/w").report == TerminalReport(
        kind="cancel_ack"
    )
    for reason in ("server_terminal", "gone"):
        assert outcome_of(Ending(stopped=reason), "/w").report is None


def test_watchdog_and_failed_exit_are_failures() -> None:
    """A watchdog ending is `idle_watchdog`; a failed exit has no reason (the server classifies
    its error text) and keeps its usage."""
    watchdog = outcome_of(Ending("s", error="silent", failure_reason="idle_watchdog"), "/w")
    assert (watchdog.status, watchdog.failure_reason) == (RunStatus.IDLE_WATCHDOG, "idle_watchdog")
    failed = outcome_of(Ending(result=RunResult(RunStatus.FAILED, error="boom", usage=USAGE)), "/w")
    assert (failed.status, failed.failure_reason) == (RunStatus.FAILED, "")
    assert failed.report is not None and failed.report.error == "boom"
    assert len(failed.usage) == 1


def test_a_failed_runs_reason_is_the_backends_then_the_texts() -> None:
    """The backend's reason and the limit's reset time go with the `fail`; without a reason
    from the backend the error text names it."""
    limited = RunResult(
        RunStatus.FAILED,
        error="You've hit your usage limit … try again at 2:05 PM.",
        failure_reason="agent_error.provider_quota_limit",
        limit_resets="2:05 PM",
    )
    outcome = outcome_of(Ending("s", result=limited), "/w")
    assert (outcome.failure_reason, outcome.limit_resets) == (
        "agent_error.provider_quota_limit",
        "2:05 PM",
    )
    cut = RunResult(RunStatus.FAILED, error="stream disconnected before completion")
    assert (
        outcome_of(Ending("s", result=cut), "/w").failure_reason == "agent_error.provider_network"
    )
    said = outcome_of(
        Ending("s", final=result_message("429 Too Many Requests", is_error=True)), "/w"
    )
    assert said.failure_reason == "agent_error.provider_capacity_or_rate_limit"


def test_a_stopped_run_reports_what_it_spent() -> None:
    """A cancel, a shutdown and the wall clock keep the usage the agent's messages showed."""
    for ending in (
        Ending("s", stopped="server_cancelled", usage=USAGE),
        Ending("s", stopped="shutdown", usage=USAGE),
        Ending("s", wall_clock=60.0, usage=USAGE),
    ):
        assert outcome_of(ending, "/w").usage == (UsageEntry.from_usage(USAGE[0]),)


def test_a_retired_session_is_named_on_complete_and_fail() -> None:
    """The session an attempt could not resume is retired whether the run completed or not;
    a withheld session leaves the report without one and says why."""
    done = RunResult(RunStatus.COMPLETED, output="ok", session_id="new-1")
    completed = outcome_of(Ending(result=done, retired_session="old-1"), "/w")
    assert completed.report is not None and completed.report.retired_session_id == "old-1"
    failed = outcome_of(Ending(error="boom", retired_session="old-1"), "/w")
    assert failed.report is not None and failed.report.retired_session_id == "old-1"
    withheld = completed.without_session().report
    assert withheld is not None
    assert (withheld.session_id, withheld.session_rollout_missing) == ("", True)
