"""Tests for the stdout reader's hand-off to the run's consumer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest
from anyio.lowlevel import checkpoint

from backends.process.inbox import Inbox

pytestmark = pytest.mark.anyio


async def test_items_arrive_in_order_and_the_end_after_the_last() -> None:
    inbox: Inbox[int] = Inbox(4)
    for item in (1, 2, 3):
        await inbox.put(item)
    inbox.close_sender()
    assert [await inbox.get() for _ in range(3)] == [1, 2, 3]
    with pytest.raises(anyio.EndOfStream):
        await inbox.get()


async def test_a_waiting_consumer_is_woken_by_each_item_and_by_the_close() -> None:
    inbox: Inbox[str] = Inbox(4)
    got: list[str] = []

    async def consume() -> None:
        try:
            while True:
                got.append(await inbox.get())
        except anyio.EndOfStream:
            got.append("end")

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        for item in ("a", "b"):
            await anyio.sleep(0.01)
            await inbox.put(item)
        await anyio.sleep(0.01)
        inbox.close_sender()
    assert got == ["a", "b", "end"]


async def test_a_full_inbox_holds_the_producer_until_the_consumer_takes_one() -> None:
    inbox: Inbox[int] = Inbox(2)
    await inbox.put(1)
    await inbox.put(2)
    with anyio.move_on_after(0.05) as waited:
        await inbox.put(3)
    assert waited.cancelled_caught and len(inbox) == 2
    async with anyio.create_task_group() as tg:
        tg.start_soon(inbox.put, 3)
        await anyio.sleep(0.01)
        assert await inbox.get() == 1
    assert [await inbox.get(), await inbox.get()] == [2, 3]


async def test_closing_the_consumer_side_releases_a_blocked_producer() -> None:
    inbox: Inbox[int] = Inbox(1)
    await inbox.put(1)
    raised: list[type[BaseException]] = []

    async def produce() -> None:
        try:
            await inbox.put(2)
        except anyio.BrokenResourceError as exc:
            raised.append(type(exc))

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        await anyio.sleep(0.01)
        inbox.close_receiver()
    assert raised == [anyio.BrokenResourceError]
    assert len(inbox) == 0
    with pytest.raises(anyio.ClosedResourceError):
        await inbox.get()


async def other_task_turns(steps: Callable[[], Awaitable[object]], times: int) -> int:
    """How often another task ran while `steps()` was awaited `times` times in a row."""
    turns = 0

    async def other() -> None:
        nonlocal turns
        while True:
            turns += 1
            await checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        await checkpoint()  # the other task starts
        before = turns
        for _ in range(times):
            await steps()
        tg.cancel_scope.cancel()
    return turns - before


async def test_a_consumer_working_through_a_backlog_lets_other_tasks_run() -> None:
    """Batches already queued are taken with a yield between them, so a long backlog does not
    hold the event loop."""
    inbox: Inbox[int] = Inbox(8)
    for item in range(3):
        await inbox.put(item)
    assert await other_task_turns(inbox.get, 3) >= 3


async def test_a_cancelled_wait_loses_nothing() -> None:
    inbox: Inbox[int] = Inbox(2)
    with anyio.move_on_after(0.01):
        await inbox.get()
    await inbox.put(7)
    assert await inbox.get() == 7


async def test_a_producer_ahead_of_its_consumer_lets_other_tasks_run() -> None:
    """Batches put while nobody waits for them come with a yield each, so a fast agent does
    not hold the event loop until the inbox is full."""
    inbox: Inbox[int] = Inbox(8)
    assert await other_task_turns(lambda: inbox.put(0), 3) >= 3
