"""The status page's chart: the daemon's CPU and its transcript lag, once a second, for minutes.

Sampled on the health loop's tick, which runs whether or not a page is open, so a sample must
cost next to nothing: one `process_time()` and the lag the tick's snapshot already holds. The
series is a tuple replaced whole on each sample (the request threads read it without a lock,
as they read the health document).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

SAMPLE_EVERY = 1.0
"""Seconds between samples."""
KEPT = 300
"""Samples kept: five minutes at one a second."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One second of the daemon."""

    at: float
    """Wall-clock time of the sample."""
    cpu_percent: float
    """The daemon process's CPU since the last sample, in percent of one core."""
    lag_seconds: float
    """The longest transcript lag any running task had since the last sample."""


class Samples:
    """A ring of the last `kept` samples, one every `every` seconds of `clock`."""

    def __init__(
        self,
        *,
        every: float = SAMPLE_EVERY,
        kept: int = KEPT,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self._every = every
        self._kept = kept
        self._clock = clock
        self._wall = wall
        self._cpu = cpu
        self._last_at = clock()
        self._last_cpu = cpu()
        self._lag = 0.0
        self.series: tuple[Sample, ...] = ()

    def observe(self, lag: float) -> None:
        """Note the lag seen now; past `every` since the last sample, take one."""
        self._lag = max(self._lag, lag)
        now = self._clock()
        elapsed = now - self._last_at
        if elapsed < self._every:
            return
        cpu = self._cpu()
        percent = 100.0 * (cpu - self._last_cpu) / elapsed
        sample = Sample(self._wall(), round(percent, 1), round(self._lag, 3))
        self.series = (*self.series[-(self._kept - 1) :], sample) if self._kept > 1 else (sample,)
        self._last_at, self._last_cpu, self._lag = now, cpu, 0.0
