"""Request intervals that stretch with the number of running tasks."""

from __future__ import annotations

from daemon.protocol.pacing import STATUS_BUDGET, TRANSCRIPT_BUDGET, TRANSCRIPT_EVERY, Pacing


def test_few_tasks_keep_the_configured_intervals() -> None:
    """Up to the budget, a task sends every 0.5 s and polls its status at the set interval."""
    pacing = Pacing(lambda: 2)
    assert pacing.transcript_interval() == TRANSCRIPT_EVERY
    assert pacing.status_interval(5.0) == 5.0


def test_many_tasks_stretch_the_intervals_to_hold_the_request_budget() -> None:
    """With 200 running tasks, all of them together stay within each budget per second."""
    running = 200
    pacing = Pacing(lambda: running)
    assert running / pacing.transcript_interval() == TRANSCRIPT_BUDGET
    assert running / pacing.status_interval(5.0) == STATUS_BUDGET


def test_intervals_follow_the_running_count_as_it_changes() -> None:
    """The count is read on every call: as tasks end, the intervals shrink back."""
    running = [500]
    pacing = Pacing(lambda: running[0])
    long = pacing.transcript_interval()
    running[0] = 1
    assert pacing.transcript_interval() == TRANSCRIPT_EVERY < long
