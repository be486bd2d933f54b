"""The daemon's stop line counts its tasks by how they ended."""

from __future__ import annotations

from daemon.task.outcome import Ending, outcome_of
from daemon.worker.summary import Summary


def test_the_line_counts_each_kind_and_a_run_that_raised_as_failed() -> None:
    """A watchdog kill, the wall clock and a run without an outcome each land on their word."""
    summary = Summary()
    summary.add(outcome_of(Ending("s1", error="stuck", failure_reason="idle_watchdog"), "/w"))
    summary.add(outcome_of(Ending("s2", wall_clock=60.0), "/w"))
    summary.add(None)
    assert summary.line() == (
        "stopped: 0 completed, 1 failed, 1 idle_watchdog, 1 timeout, 0 cancelled"
    )
