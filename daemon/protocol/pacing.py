"""How often each running task talks to the server: less often per task as more tasks run.

Every running task sends its transcript and asks for its status on its own schedule, so the
daemon's request rate grew with the number of tasks: 200 agents cost hundreds of requests a
second, nearly all of the daemon's CPU and most of a small server's. Each interval below is the
configured one until the running tasks together would exceed a budget of requests a second;
past that it stretches, so a batch carries more messages instead of more batches being sent.
"""

from __future__ import annotations

from collections.abc import Callable

TRANSCRIPT_EVERY = 0.5
"""Seconds between a task's transcript batches while few tasks run."""
TRANSCRIPT_BUDGET = 5.0
"""Transcript batches a second, all running tasks together, before the interval stretches.

Each batch is an HTTP request, about a millisecond and a half of the daemon's CPU whatever it
carries: at 20 agents printing 10 lines a second, 10 batches a second were a quarter of the
daemon's work, 5 (a batch every 4 s per task) bring it from about 7.5 % of a core to 5-6 %."""
STATUS_BUDGET = 10.0
"""Status polls a second, all running tasks together, before the interval stretches."""


class Pacing:
    """Per-task request intervals that keep the daemon's total request rate bounded."""

    def __init__(self, running: Callable[[], int] = lambda: 1) -> None:
        self._running = running

    def transcript_interval(self) -> float:
        """Seconds until a task's next transcript batch (0.5 s up to 2 running tasks)."""
        return self._stretch(TRANSCRIPT_EVERY, TRANSCRIPT_BUDGET)

    def status_interval(self, every: float) -> float:
        """Seconds until a task's next status poll: `every`, or longer under load."""
        return self._stretch(every, STATUS_BUDGET)

    def _stretch(self, every: float, budget: float) -> float:
        return max(every, self._running() / budget)
