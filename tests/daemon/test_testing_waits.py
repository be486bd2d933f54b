"""`daemon.testing`'s waits: they return on the event, name it when it never comes, and end a
child whether or not it is still running."""

from __future__ import annotations

import anyio
import pytest

from daemon.testing import WaitTimeout, port_answers, python, stopped, wait_for, wait_until

pytestmark = pytest.mark.anyio


async def test_wait_for_returns_once_the_state_is_reached() -> None:
    """A state set by another task ends the wait; an async predicate works as a sync one."""
    reached = anyio.Event()

    async def is_set() -> bool:
        return reached.is_set()

    async def waiter() -> None:
        await wait_for(is_set, what="the event")
        order.append("waited")

    order: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(0.1)  # the waiter polls meanwhile; nothing ends it yet
        order.append("set")
        reached.set()
    assert order == ["set", "waited"]


async def test_a_wait_that_never_ends_names_its_event() -> None:
    """The safety net's error says which event never came."""
    with pytest.raises(WaitTimeout, match="waiting for the run to start"):
        await wait_for(lambda: False, what="the run to start", within=0.05)


def test_the_sync_wait_names_its_event_too() -> None:
    """`wait_until` is the same wait outside an event loop."""
    with pytest.raises(WaitTimeout, match="the file to appear"):
        wait_until(lambda: False, what="the file to appear", within=0.05)


async def test_port_answers_once_something_listens() -> None:
    """A listener bound before the wait is found at once; a closed port fails naming it."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        await port_answers(port, what="the listener")
    with pytest.raises(WaitTimeout, match="the closed port"):
        await port_answers(port, what="the closed port", within=0.1)


async def test_stopped_ends_a_running_child_and_accepts_one_already_gone() -> None:
    """A running child is terminated; one that exited on its own and was reaped (where
    `terminate()` raises ProcessLookupError) gives its own exit code."""
    running = await anyio.open_process(python("import time; time.sleep(60)"))
    gone = await anyio.open_process(python("raise SystemExit(7)"))
    async with running, gone:
        with anyio.fail_after(30):
            await gone.wait()  # reaped: terminate() would raise ProcessLookupError now
        assert await stopped(running) == -15
        assert await stopped(gone) == 7
