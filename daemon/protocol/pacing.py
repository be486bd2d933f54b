"""How often each running task talks to the server: at Multica's pace, with a safety valve.

Multica's own daemon sends each task's transcript every 500 ms and polls each task's status at
its interval (5 s) however many tasks run, and so does this one up to 400 running tasks (twice
the load it is measured at: 200 agents, each request about half a millisecond of the daemon's
CPU). Past that the intervals stretch so that all tasks together stay within a budget of
requests a second — a batch then carries more messages instead of more batches going out.
The valve says in the log when it opens and closes, and the transcript interval is the gauge
`agent_daemon_transcript_interval_seconds`.

Every task's periodic request waits for the same beat (`until_beat`), not for its own timer:
a process woken by the kernel costs far more CPU than the Python it then runs (about 0.15 ms a
wake-up on a small VM), and 20 tasks flushing on their own timers woke the daemon 40 times a
second where one beat wakes it twice.

Up to `TASKS_A_BEAT` running tasks share one instant of the beat; past that the beat splits into
evenly spaced instants, one for every `TASKS_A_BEAT` tasks, and each task keeps to one of them
(`Pacing.offset`, by a stable hash of its id). All 200 batches at one instant left together and
the last answers came about half a second later (lag p95 0.9-1.0 s at 200 tasks × 1 line/s
against 0.5 s for Multica's daemon, whose tasks each keep their own timer); 20 at a time are
answered within a few tens of milliseconds. At 20 tasks the daemon still wakes twice a second.
A task's status polls keep to its instant too, each task on another turn of the 5 s interval,
so the polls add a few requests to every instant instead of all of them to one.
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from daemon.ops.metrics import Metrics

log = logging.getLogger(__name__)

TRANSCRIPT_EVERY = 0.5
"""Seconds between a task's transcript batches (Multica's daemon: 500 ms)."""
TRANSCRIPT_BUDGET = 800.0
"""Transcript batches a second, all running tasks together, past which the interval stretches
(above 400 running tasks)."""
STATUS_BUDGET = 80.0
"""Status polls a second, all running tasks together, past which the interval stretches
(above 400 running tasks at the default 5 s)."""
SAME_BEAT = 1e-3
"""Seconds within which a beat counts as the one just reached (`until_beat`)."""
TASKS_A_BEAT = 20
"""Running tasks whose requests leave on one instant of the beat; more split the beat."""


class Pacing:
    """Per-task request intervals: the configured ones, stretched only past the valve."""

    def __init__(
        self, running: Callable[[], int] = lambda: 1, metrics: Metrics | None = None
    ) -> None:
        self._running = running
        self._metrics = metrics
        self._stretched = False
        if metrics is not None:
            metrics.transcript_interval.set(TRANSCRIPT_EVERY)

    def transcript_interval(self) -> float:
        """Seconds until a task's next transcript batch (0.5 s up to 400 running tasks)."""
        running = self._running()
        interval = max(TRANSCRIPT_EVERY, running / TRANSCRIPT_BUDGET)
        stretched = interval > TRANSCRIPT_EVERY
        changed, self._stretched = stretched != self._stretched, stretched
        if self._metrics is not None and (stretched or changed):
            self._metrics.transcript_interval.set(interval)
        if changed:
            if stretched:
                log.warning(
                    "%d tasks running: transcript batches every %.2fs instead of %.1fs "
                    "(at most %.0f a second in all)",
                    running,
                    interval,
                    TRANSCRIPT_EVERY,
                    TRANSCRIPT_BUDGET,
                )
            else:
                log.warning("transcript batches every %.1fs again", TRANSCRIPT_EVERY)
        return interval

    def status_interval(self, every: float) -> float:
        """Seconds until a task's next status poll: `every`, longer only past the valve."""
        return max(every, self._running() / STATUS_BUDGET)

    def offset(self, task_id: str, every: float) -> float:
        """Seconds into each beat of `every` at which this task's requests leave.

        Within the transcript's beat, one of `ceil(running / TASKS_A_BEAT)` evenly spaced
        instants, chosen by a stable hash of the id (0 up to `TASKS_A_BEAT` tasks: one
        instant, one wake-up). A longer interval (the status poll's) keeps that instant and
        adds a turn of the transcript's beat, so each turn carries a share of the polls."""
        key = zlib.crc32(task_id.encode())
        instants = max(1, math.ceil(self._running() / TASKS_A_BEAT))
        turns = max(1, round(every / TRANSCRIPT_EVERY))
        at = (key % instants) * TRANSCRIPT_EVERY / instants
        return (at + (key // instants) % turns * TRANSCRIPT_EVERY) % every


def until_beat(
    every: float, now: float | None = None, *, at_least: float = 0.0, offset: float = 0.0
) -> float:
    """Seconds from `now` (the event loop's clock) to the next multiple of `every`, plus
    `offset`, at least `at_least` away: tasks waiting for the same interval and offset wake on
    the same beat, whenever each of them started."""
    now = anyio.current_time() if now is None else now
    wait = every - (now - offset) % every
    # A beat nearer than `SAME_BEAT` is the one just woken for: a timer may fire a little
    # before its time and an offset beat's time is rounded, and waiting for that beat again
    # woke the task a second time (with an offset, on a virtual clock, without end).
    while wait < max(at_least, SAME_BEAT):
        wait += every
    return wait


def _on_the_beat(every: float) -> float:
    return 0.0


@dataclass(frozen=True, slots=True)
class Beat:
    """When a task's periodic requests leave: on each beat of `interval()` seconds (asked
    before each wait: it stretches with the daemon's load), `offset(every)` into it."""

    interval: Callable[[], float]
    offset: Callable[[float], float] = _on_the_beat

    @classmethod
    def every(cls, seconds: float) -> Beat:
        """A fixed interval, on the beat itself."""
        return cls(lambda: seconds)

    def wait(self, every: float | None = None, *, at_least: float = 0.0) -> float:
        """Seconds until this task's next beat of `every` (default: `interval()`), at least
        `at_least` away."""
        every = self.interval() if every is None else every
        return until_beat(every, at_least=at_least, offset=self.offset(every))


TRANSCRIPT_BEAT = Beat.every(TRANSCRIPT_EVERY)
"""A transcript's beat alone: every 0.5 s, on the beat."""
