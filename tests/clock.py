"""A fake monotonic clock whose sleep advances time instantly, for watchdog and retry tests."""

from __future__ import annotations

import anyio


class FakeClock:
    """`clock()` reads the fake time; `await sleep(s)` advances it by `s` and yields once."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await anyio.lowlevel.checkpoint()


class RecordingSleep:
    """A sleep that records the delays it is asked for and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await anyio.lowlevel.checkpoint()
