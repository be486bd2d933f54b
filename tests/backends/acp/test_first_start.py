"""One first start at a time per data directory, until a session opened there.

On trio's virtual clock (`MockClock`, jumping to the next timer whenever every task waits): the
order of the starts and the bound on a wait are a matter of timers, not of the machine's load.
"""

from __future__ import annotations

import anyio
import pytest
from trio.testing import MockClock

from backends.acp.first_start import FirstStarts, data_dir

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return "trio", {"clock": MockClock(autojump_threshold=0)}


async def test_second_start_waits_for_the_first_session_to_open() -> None:
    """On a fresh directory the second start waits until the first one's session opened."""
    starts, order = FirstStarts(), []
    first_opened, second_opened = anyio.Event(), anyio.Event()

    async def first() -> None:
        async with starts.turn("home", first_opened):
            order.append("first in")
            await anyio.sleep(0.05)
            order.append("first opened")
            first_opened.set()
            await anyio.sleep(0.05)  # still running: the others need not wait for its end
            order.append("first ends")

    async def second() -> None:
        await anyio.sleep(0.01)
        async with starts.turn("home", second_opened):
            order.append("second in")

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(second)
    assert order == ["first in", "first opened", "second in", "first ends"]


async def test_failed_first_start_lets_the_next_one_try() -> None:
    """A first start that ended without a session hands the turn to the next start."""
    starts = FirstStarts()
    async with starts.turn("home", anyio.Event()):
        pass
    with anyio.fail_after(1):
        async with starts.turn("home", anyio.Event()):
            pass


async def test_warm_directory_and_other_directories_never_wait() -> None:
    """Once a session opened there, or on another directory, starts go at once."""
    starts, opened = FirstStarts(), anyio.Event()
    opened.set()
    async with starts.turn("warm", opened):
        pass
    with anyio.fail_after(1):
        async with starts.turn("cold", anyio.Event()), starts.turn("warm", anyio.Event()):
            pass


async def test_wait_is_bounded() -> None:
    """A first start that hangs holds the others up only for the bound."""
    starts = FirstStarts(wait=0.1)
    async with starts.turn("home", anyio.Event()):
        with anyio.fail_after(1):
            async with starts.turn("home", anyio.Event()):
                pass


def test_data_dir_follows_xdg() -> None:
    """The directory is XDG_DATA_HOME when set, else HOME."""
    assert data_dir({"HOME": "/h", "XDG_DATA_HOME": "/x"}) == "/x"
    assert data_dir({"HOME": "/h"}) == "/h"
