"""The shared beat under load, on a virtual clock: 200 tasks' transcripts and status polls
against a server that answers one request at a time.

`SERVICE` is what one request costs the daemon and the Multica-faithful server together on the
2-core test machine: at 200 tasks × 1 line/s the batches of one beat were answered over about
half a second. With every task on one instant of the beat this model gives what the machine
measured (lag p95 0.9 s, max 1.2 s); Multica's daemon, its tasks each on their own timer, had
p95 0.5 s. Trio's `MockClock` jumps to the next timer whenever every task waits, so 20 s of
load take a second or two of CPU and no result depends on the machine's speed.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from trio.testing import MockClock

from backends.base import Message, MessageType
from daemon.ops.metrics import Metrics
from daemon.protocol.pacing import Beat, Pacing
from daemon.task.status_poll import poll_status
from daemon.task.transcript import Transcript

SERVICE = 0.0025
"""Seconds of one request, requests answered one after another."""
WARM_UP = 3.0
WINDOW = 20.0


class OneAtATime:
    """A task server answering one request at a time; it notes each message's lag (its text
    is the virtual time it was printed)."""

    def __init__(self, since: float) -> None:
        self._lock = anyio.Lock()
        self._since = since
        self.lags: list[float] = []

    async def send_messages(self, task_id: str, messages: Any, *, retry: bool = True) -> None:
        async with self._lock:
            await anyio.sleep(SERVICE)
        now = anyio.current_time()
        printed = [float(m["content"]) for m in messages]
        self.lags += [now - at for at in printed if at >= self._since]

    async def task_status(self, task_id: str) -> str:
        async with self._lock:
            await anyio.sleep(SERVICE)
        return "running"


async def _load(tasks: int, rate: float, spread: bool) -> list[float]:
    """Lags of the messages printed after the warm-up by `tasks` agents at `rate` lines/s."""
    pacing = Pacing(lambda: tasks)
    rng = random.Random(7)
    server = OneAtATime(since=anyio.current_time() + WARM_UP)

    async def agent(transcript: Transcript) -> None:
        await anyio.sleep(rng.random() / rate)
        while True:
            transcript.add(Message(type=MessageType.TEXT, content=repr(anyio.current_time())))
            await anyio.sleep(1 / rate)

    async with anyio.create_task_group() as tg:
        for n in range(tasks):
            task_id = f"{n:08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
            offset: Callable[[float], float] = (
                functools.partial(pacing.offset, task_id) if spread else (lambda every: 0.0)
            )
            beat = Beat(pacing.transcript_interval, offset)
            transcript = Transcript(server, task_id, Metrics(), beat=beat)
            tg.start_soon(transcript.run)
            tg.start_soon(agent, transcript)
            tg.start_soon(poll_status, server, task_id, Beat(lambda: 5.0, offset), print)
        await anyio.sleep(WARM_UP + WINDOW)
        tg.cancel_scope.cancel()
    return sorted(server.lags)


def lags(tasks: int, rate: float, *, spread: bool = True) -> tuple[float, float]:
    """(p95, max) of the lag, in virtual seconds."""
    clock = MockClock(autojump_threshold=0)
    found = anyio.run(_load, tasks, rate, spread, backend="trio", backend_options={"clock": clock})
    assert len(found) >= 0.95 * tasks * rate * WINDOW
    return found[int(0.95 * len(found))], found[-1]


@pytest.mark.timeout(60)  # a second or two of CPU; a beat woken for twice spins forever
def test_two_hundred_tasks_answered_as_fast_as_multicas_daemon() -> None:
    """200 tasks × 1 line/s: lag p95 ≤ 0.5 s and max ≤ 0.7 s (on one shared instant the
    model gives 0.9 s and 1.2 s, as measured)."""
    p95, most = lags(200, 1.0)
    assert p95 <= 0.5
    assert most <= 0.7


@pytest.mark.timeout(60)
def test_twenty_tasks_keep_their_lag() -> None:
    """20 tasks × 10 lines/s, their batches on one instant as before: lag p95 about half a
    second (the beat's own wait), the polls no longer all on one turn."""
    p95, most = lags(20, 10.0)
    assert p95 <= 0.55
    assert most <= 0.6
