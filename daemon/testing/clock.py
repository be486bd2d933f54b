"""A fake monotonic clock whose sleep advances time at once, and a sleep that only records."""

from __future__ import annotations

import anyio


class FakeClock:
    """`clock()` reads the fake time; `advance(s)` moves it by hand; `await sleep(s)` advances
    it by `s` and yields once, so a 30-minute window is crossed in no time."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the time forward by `seconds`."""
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        """Record the wait, advance by it and yield once."""
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
