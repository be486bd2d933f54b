"""Tests for the status poll and the statuses the server names in its transcript answers.

On trio's virtual clock (`MockClock`, jumping to the next timer whenever every task waits): the
polls counted in a window and where on the beat they fall do not move with the machine's load.
"""

from __future__ import annotations

import anyio
import pytest
from trio.testing import MockClock

from daemon.protocol.pacing import Beat
from daemon.task.status_poll import StatusNews, poll_status
from daemon.testing import FakeTaskServer
from daemon.wakeup import Wakeup
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return "trio", {"clock": MockClock(autojump_threshold=0)}


EVERY = 0.1


async def poll_for(
    server: FakeTaskServer, seconds: float, due: Wakeup, news: StatusNews | None
) -> list[str]:
    """Run the poll for `seconds` (or until it stops the run); the reasons it stopped for."""
    stops: list[str] = []
    with anyio.move_on_after(seconds):
        await poll_status(server, "t1", Beat.every(EVERY), stops.append, due, news)
    return stops


async def test_without_news_the_server_is_polled_every_interval() -> None:
    server = FakeTaskServer()
    assert await poll_for(server, 10 * EVERY + EVERY / 2, Wakeup(), None) == []
    # One a beat: 0.1 s, 0.2 s, ... 1.0 s.
    assert server.count("task_status") == 10


async def test_a_status_named_in_each_interval_stands_in_for_the_polls() -> None:
    """While the transcript's answers keep naming the status, no poll is made."""
    server, due = FakeTaskServer(), Wakeup()
    news = StatusNews(due)

    async def transcript_answers() -> None:
        while True:
            news.heard("running")
            await anyio.sleep(EVERY / 10)

    async with anyio.create_task_group() as tg:
        tg.start_soon(transcript_answers)
        assert await poll_for(server, 10 * EVERY, due, news) == []
        tg.cancel_scope.cancel()
    assert server.count("task_status") == 0


async def test_news_gone_stale_brings_the_polls_back() -> None:
    """A task whose transcript stopped flowing is polled again."""
    server, due = FakeTaskServer(), Wakeup()
    news = StatusNews(due)
    news.heard("running")
    assert await poll_for(server, 10 * EVERY + EVERY / 2, due, news) == []
    assert server.count("task_status") == 9  # every interval after the first


async def test_a_finished_status_in_an_answer_stops_the_run_at_once() -> None:
    server, due = FakeTaskServer(), Wakeup()
    news = StatusNews(due)
    stops: list[str] = []

    async with anyio.create_task_group() as tg:
        tg.start_soon(poll_status, server, "t1", Beat.every(60.0), stops.append, due, news)
        await anyio.sleep(0.01)
        news.heard("cancelled")
        await eventually(lambda: bool(stops), within=5, every=0.005)
    assert stops == ["server_cancelled"]
    assert server.count("task_status") == 0


async def test_an_early_check_polls_even_with_fresh_news() -> None:
    """`due` set from elsewhere (the server said the task was cancelled) asks the server,
    whatever an earlier answer said."""
    server, due = FakeTaskServer(status="cancelled"), Wakeup()
    news = StatusNews(due)
    news.heard("running")
    stops: list[str] = []

    async with anyio.create_task_group() as tg:
        tg.start_soon(poll_status, server, "t1", Beat.every(60.0), stops.append, due, news)
        await anyio.sleep(0.01)
        due.set()
        await eventually(lambda: bool(stops), within=5, every=0.005)
    assert stops == ["server_cancelled"]
    assert server.count("task_status") == 1


async def test_a_task_the_server_forgot_stops_as_gone() -> None:
    server = FakeTaskServer()
    server.forget("t1")
    assert await poll_for(server, 1.0, Wakeup(), None) == ["gone"]


class TimedServer(FakeTaskServer):
    """Notes the time of every status poll in `times`."""

    def __init__(self, times: list[float]) -> None:
        super().__init__()
        self.times = times

    async def task_status(self, task_id: str) -> str:
        self.times.append(anyio.current_time())
        return await super().task_status(task_id)


async def test_polls_of_tasks_started_apart_fall_on_one_shared_beat() -> None:
    """Two tasks' polls, started 0.15 s apart, are made together on the interval's beat."""
    every = 0.4
    times: list[float] = []
    server, stops = TimedServer(times), list[str]()
    await anyio.sleep(every - anyio.current_time() % every)  # just after a beat
    async with anyio.create_task_group() as tg:
        for task_id in ("t1", "t2"):
            tg.start_soon(poll_status, server, task_id, Beat.every(every), stops.append)
            await anyio.sleep(0.15)
        await eventually(lambda: len(times) >= 2, within=5)
        tg.cancel_scope.cancel()
    assert times[1] == times[0]  # on their own timers they were 0.15 s apart
    assert stops == []


async def test_a_poll_is_made_at_its_offset_into_the_beat() -> None:
    """A task's polls leave `offset(interval)` after the interval's beat."""
    every, offset = 0.4, 0.25
    times: list[float] = []
    server, stops = TimedServer(times), list[str]()
    await anyio.sleep(every - anyio.current_time() % every)  # just after a beat
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            poll_status, server, "t1", Beat(lambda: every, lambda _: offset), stops.append
        )
        await eventually(lambda: len(times) >= 1, within=5)
        tg.cancel_scope.cancel()
    # On the shared beat it came 0.4 s after the start (the first wait is half an interval at
    # least), 0.15 s from the asked offset.
    assert (times[0] - offset) % every < 1e-9
    assert stops == []
