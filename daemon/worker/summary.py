"""The line the daemon logs when it stops: how its tasks ended, by kind."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from daemon.task.outcome import Outcome  # the task machinery: imported once up (runs.py)

KINDS = ("completed", "failed", "idle_watchdog", "timeout", "cancelled")


class Summary:
    """Counts finished tasks by the word the summary line uses for each."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, outcome: Outcome | None) -> None:
        """Count one finished task (None: its run raised before deciding)."""
        self.counts[_label(outcome)] += 1

    def line(self) -> str:
        """`stopped: 3 completed, 0 failed, ...`."""
        return "stopped: " + ", ".join(f"{self.counts[kind]} {kind}" for kind in KINDS)


def _label(outcome: Outcome | None) -> str:
    """The word a finished task adds to the shutdown summary line."""
    if outcome is None:
        return "failed"
    if outcome.failure_reason in ("idle_watchdog", "timeout", "cancelled"):
        return outcome.failure_reason
    return outcome.status.value
