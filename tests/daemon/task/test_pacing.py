"""Request intervals at Multica's pace, stretched only past the safety valve (400 tasks)."""

from __future__ import annotations

import logging

import pytest

from daemon.ops.metrics import Metrics
from daemon.protocol.pacing import (
    STATUS_BUDGET,
    TRANSCRIPT_BUDGET,
    TRANSCRIPT_EVERY,
    Pacing,
    until_beat,
)

GAUGE = "agent_daemon_transcript_interval_seconds"


def test_up_to_400_tasks_keep_multicas_pace() -> None:
    """At 400 running tasks each still sends every 0.5 s and polls at the set interval."""
    pacing = Pacing(lambda: 400)
    assert pacing.transcript_interval() == TRANSCRIPT_EVERY
    assert pacing.status_interval(5.0) == 5.0


def test_past_the_valve_all_tasks_together_hold_the_budget() -> None:
    """With 1,000 running tasks, all of them together stay within each budget per second."""
    running = 1000
    pacing = Pacing(lambda: running)
    assert running / pacing.transcript_interval() == TRANSCRIPT_BUDGET
    assert running / pacing.status_interval(5.0) == STATUS_BUDGET


def test_the_valve_says_so_in_the_log_and_the_gauge_and_closes_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Opening and closing are one log line each; the gauge follows the interval."""
    running = [1000]
    metrics = Metrics()
    pacing = Pacing(lambda: running[0], metrics)
    assert metrics.registry.get_sample_value(GAUGE) == TRANSCRIPT_EVERY
    with caplog.at_level(logging.WARNING, logger="daemon.protocol.pacing"):
        long = pacing.transcript_interval()
        pacing.transcript_interval()
        assert metrics.registry.get_sample_value(GAUGE) == long > TRANSCRIPT_EVERY
        running[0] = 1
        assert pacing.transcript_interval() == TRANSCRIPT_EVERY
    assert metrics.registry.get_sample_value(GAUGE) == TRANSCRIPT_EVERY
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("1000 tasks running: transcript batches every 1.25s")
    assert lines[1] == "transcript batches every 0.5s again"


def test_the_wait_ends_on_the_next_beat_at_least_as_far_as_asked() -> None:
    """Beats are the multiples of the interval, whenever the waiting task started."""
    assert until_beat(5.0, now=101.0) == pytest.approx(4.0)
    assert until_beat(5.0, now=104.0) == pytest.approx(1.0)
    assert until_beat(5.0, now=104.0, at_least=2.5) == pytest.approx(6.0)
    assert until_beat(0.5, now=100.0) == pytest.approx(0.5)
