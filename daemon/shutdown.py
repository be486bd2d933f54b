"""The shutdown budget: the daemon's stage, and how long each step may still take in it.

The worker advances the stage (`drain` at the first signal, `stop` at the second or when the
grace runs out). Each object that owns a cancel scope reads the budget for that scope's
deadline, when it enters the scope and again at every stage change, so nobody reaches into a
scope it does not own. What a shortened step does not finish goes to the outbox.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio


class Stage(enum.IntEnum):
    """Where the daemon is in its life: later stages allow less time."""

    RUNNING = 0
    DRAINING = 1
    """No new claims; running tasks may finish within the shutdown grace."""
    STOPPING = 2
    """Running tasks are cancelled; each still reports, briefly."""


@dataclass(frozen=True, slots=True)
class Step:
    """A bounded piece of work: from `stage` on, it may take `within` seconds from its start."""

    stage: Stage
    within: float


CLAIM = Step(Stage.DRAINING, 1.0)
"""A claim under way when draining starts: its answer is awaited, not its retries."""
REPORT_CALL = Step(Stage.DRAINING, 3.0)
"""One terminal report call (with its retries) once the daemon is draining."""
TRANSCRIPT_FLUSH = Step(Stage.STOPPING, 2.0)
"""A cancelled task's final transcript flush."""
REPORT = Step(Stage.STOPPING, 3.0)
"""The rest of a cancelled task's report: transcript leftovers, usage, the terminal call."""


class ShutdownBudget:
    """The daemon's stage and each step's allowance in it, shared by the worker, the runs,
    the transcripts and the server client."""

    def __init__(self, clock: Callable[[], float] = anyio.current_time) -> None:
        self.stage = Stage.RUNNING
        self._clock = clock
        self._watchers: set[Callable[[], None]] = set()

    def drain(self) -> None:
        """First stage: stop claiming, let running tasks finish."""
        self._advance(Stage.DRAINING)

    def stop(self) -> None:
        """Second stage: cancel running tasks; reports get only their short allowances."""
        self._advance(Stage.STOPPING)

    @property
    def stopping(self) -> bool:
        """True once running tasks are being cancelled."""
        return self.stage >= Stage.STOPPING

    def cutoff(self, step: Step) -> float:
        """The latest deadline for `step` if it started now (infinite before its stage)."""
        return self._clock() + step.within if self.stage >= step.stage else math.inf

    @contextmanager
    def bounding(self, scope: anyio.CancelScope, step: Step) -> Iterator[anyio.CancelScope]:
        """For a scope's owner: keep `scope` within `step`'s allowance now and at each later
        stage change, while inside this block."""

        def cut() -> None:
            scope.deadline = min(scope.deadline, self.cutoff(step))

        cut()
        self._watchers.add(cut)
        try:
            yield scope
        finally:
            self._watchers.discard(cut)

    def _advance(self, stage: Stage) -> None:
        if stage <= self.stage:
            return
        self.stage = stage
        for watcher in list(self._watchers):
            watcher()
