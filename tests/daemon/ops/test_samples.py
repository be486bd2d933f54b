"""The status page's chart samples: once a second, the CPU between them, the peak lag."""

from __future__ import annotations

from daemon.ops.samples import Sample, Samples


class Dials:
    """A monotonic clock, a wall clock and a CPU counter the test turns."""

    def __init__(self) -> None:
        self.now = 50.0
        self.cpu = 7.0

    def clock(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_000_000.0 + self.now

    def process(self) -> float:
        return self.cpu


def samples(dials: Dials, kept: int = 300) -> Samples:
    return Samples(kept=kept, clock=dials.clock, wall=dials.wall, cpu=dials.process)


def test_one_sample_a_second_with_the_cpu_share_and_the_peak_lag_since_the_last() -> None:
    """Ticks in between only note the lag; the sample holds CPU seconds per second and the
    highest lag any tick saw."""
    dials = Dials()
    ring = samples(dials)
    dials.now += 0.5
    ring.observe(lag=0.8)
    assert ring.series == ()
    dials.now += 0.5
    dials.cpu += 0.25
    ring.observe(lag=0.1)
    assert ring.series == (Sample(1_000_051.0, 25.0, 0.8),)
    dials.now += 1.0
    ring.observe(lag=0.0)
    assert ring.series[-1] == Sample(1_000_052.0, 0.0, 0.0)


def test_the_ring_keeps_only_the_last_samples() -> None:
    """Past `kept` samples the oldest go, oldest first in what is left."""
    dials = Dials()
    ring = samples(dials, kept=3)
    for lag in range(5):
        dials.now += 1.0
        ring.observe(lag=float(lag))
    assert [s.lag_seconds for s in ring.series] == [2.0, 3.0, 4.0]
