"""Request intervals at Multica's pace, stretched only past the safety valve (400 tasks)."""

from __future__ import annotations

import logging
import uuid
from collections import Counter

import pytest

from daemon.ops.metrics import Metrics
from daemon.protocol.pacing import (
    STATUS_BUDGET,
    TASKS_A_BEAT,
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


def test_an_offset_moves_the_beat() -> None:
    """With an offset the beats are the multiples of the interval plus the offset."""
    assert until_beat(0.5, now=100.0, offset=0.2) == pytest.approx(0.2)
    assert until_beat(0.5, now=100.3, offset=0.2) == pytest.approx(0.4)
    assert until_beat(5.0, now=102.0, offset=3.5, at_least=2.5) == pytest.approx(6.5)


def task_ids(count: int) -> list[str]:
    return [str(uuid.uuid5(uuid.NAMESPACE_URL, f"task-{n}")) for n in range(count)]


def test_up_to_twenty_tasks_send_on_one_instant_of_the_beat() -> None:
    """At 20 running tasks every batch leaves on the same instant: two wake-ups a second."""
    pacing = Pacing(lambda: TASKS_A_BEAT)
    assert {pacing.offset(t, TRANSCRIPT_EVERY) for t in task_ids(TASKS_A_BEAT)} == {0.0}


def test_two_hundred_tasks_spread_their_batches_over_the_beat() -> None:
    """At 200 running tasks the batches leave on 10 instants 50 ms apart, a few tens on each,
    not all 200 at once (whose last answers came half a second later)."""
    pacing = Pacing(lambda: 200)
    ids = task_ids(200)
    offsets = [pacing.offset(t, TRANSCRIPT_EVERY) for t in ids]
    assert offsets == [pacing.offset(t, TRANSCRIPT_EVERY) for t in ids]  # stable
    by_instant = Counter(round(o, 6) for o in offsets)
    assert sorted(by_instant) == [round(n * TRANSCRIPT_EVERY / 10, 6) for n in range(10)]
    assert max(by_instant.values()) <= 2 * TASKS_A_BEAT


@pytest.mark.parametrize("running", [20, 200])
def test_status_polls_keep_the_tasks_instant_and_spread_over_the_interval(running: int) -> None:
    """A task's polls leave on its transcript instant (no wake-up of their own), each task on
    another half-second turn of the 5 s interval, so no turn carries all of them."""
    pacing = Pacing(lambda: running)
    ids = task_ids(running)
    polls: Counter[float] = Counter()
    for task in ids:
        poll, batch = pacing.offset(task, 5.0), pacing.offset(task, TRANSCRIPT_EVERY)
        assert 0.0 <= poll < 5.0
        assert (poll - batch) / TRANSCRIPT_EVERY == pytest.approx(
            round((poll - batch) / TRANSCRIPT_EVERY)
        )
        polls[round(poll, 6)] += 1
    assert max(polls.values()) <= max(5, running // 20)


def test_a_beat_just_reached_is_not_waited_for_again() -> None:
    """Woken a hair before its beat (a timer firing early, an offset beat's rounded time), the
    next wait is for the following beat, not a second wake-up a nanosecond later."""
    assert until_beat(0.5, now=100.3 - 1e-9, offset=0.3) == pytest.approx(0.5)
    assert until_beat(0.5, now=100.5 - 1e-12) == pytest.approx(0.5)
