"""One task at a time per folder, first come first served."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from daemon.task.localdir.locks import DirectoryLocks
from daemon.testing.waits import wait_for

pytestmark = pytest.mark.anyio
FOLDER = Path("/work/project")


async def test_waiters_get_the_folder_in_the_order_they_asked() -> None:
    """Released, the folder goes to the task that asked first; the holder is named."""
    locks, order = DirectoryLocks(), []
    assert locks.try_take(FOLDER, "a")

    async def take(task: str) -> None:
        await locks.take(FOLDER, task)
        order.append(task)

    async with anyio.create_task_group() as tg:
        tg.start_soon(take, "b")
        await wait_for(lambda: locks.waiting() == 1, what="b to wait")
        tg.start_soon(take, "c")
        await wait_for(lambda: locks.waiting() == 2, what="c to wait")
        assert not locks.try_take(FOLDER, "d")  # nobody jumps the queue
        assert locks.holder(FOLDER) == "a"
        locks.release(FOLDER, "a")
        await wait_for(lambda: order == ["b"], what="b to hold it")
        locks.release(FOLDER, "b")
    assert order == ["b", "c"] and locks.holder(FOLDER) == "c"
    locks.release(FOLDER, "c")
    assert locks.try_take(FOLDER, "d")


async def test_a_cancelled_wait_takes_nothing_and_blocks_nobody() -> None:
    """A waiter cancelled leaves the queue; one cancelled as it was handed the folder passes
    it on."""
    locks = DirectoryLocks()
    locks.try_take(FOLDER, "a")
    with anyio.move_on_after(0.05):
        await locks.take(FOLDER, "b")
    assert locks.waiting() == 0
    locks.release(FOLDER, "a")
    assert locks.holder(FOLDER) == "" and locks.try_take(FOLDER, "c")


def test_other_folders_and_other_holders_are_not_touched() -> None:
    """A release by a task that does not hold the folder changes nothing."""
    locks = DirectoryLocks()
    assert locks.try_take(FOLDER, "a") and locks.try_take(Path("/other"), "b")
    locks.release(FOLDER, "b")
    assert locks.holder(FOLDER) == "a"
