"""A task's beat shared by its transcript and its agent's held reads: the flush follows the read
on each beat (daemon/task/shared_beat.py).

On trio's virtual clock (`MockClock`, jumping to the next timer whenever every task waits): what
is measured is where on the beat a batch leaves, which on the real clock a loaded machine moved
by more than the margins (0.28 s against a bound of 0.15).
"""

from __future__ import annotations

import anyio
import pytest
from anyio.abc import TaskStatus
from trio.testing import MockClock

from daemon.ops.metrics import Metrics
from daemon.protocol.pacing import Beat
from daemon.task.transcript import Transcript
from tests.daemon.task.test_transcript import TASK, TimedServer, text
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return "trio", {"clock": MockClock(autojump_threshold=0)}


EVERY = 0.3
READ_TAKES = 0.02
"""How long after its beat a held read's lines are queued (the read and the parse)."""


def _transcript(server: TimedServer) -> Transcript:
    return Transcript(server, TASK, Metrics(), beat=Beat.every(EVERY))


async def _back(
    t: Transcript, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """The reader back for its next hold: started once it has let the flush go."""
    task_status.started()
    await t.beat.hold()  # lets the flush go before its first wait


async def test_a_held_readers_lines_leave_right_after_its_read_on_the_beat() -> None:
    """What a held reader reads on a beat leaves when it comes back to hold, not a beat later
    (the flush's own timer on the same beat fired before the read)."""
    server = TimedServer()
    t = _transcript(server)
    queued: list[float] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.run)
        for n in range(3):
            await t.beat.hold()
            await anyio.sleep(READ_TAKES)
            t.add(text(f"read {n}"))
            queued.append(anyio.current_time())
        await t.beat.hold()
        await eventually(lambda: len(server.arrivals) == 3, within=5)
        tg.cancel_scope.cancel()
    assert [[m["content"] for m in batch] for batch in server.batches] == [
        ["read 0"],
        ["read 1"],
        ["read 2"],
    ]
    waits = [sent - read for sent, read in zip(server.arrivals, queued, strict=True)]
    assert max(waits) < EVERY / 2  # the next beat was EVERY - READ_TAKES away


async def test_a_reader_back_while_the_last_flush_sends_has_its_lines_sent_next() -> None:
    """The reader's call that lets the flush go can come while the flush before is still on
    its way (the flush's own timer fired on the same beat, just before the read): what it
    read leaves as soon as that flush is done, not when the reader comes back a beat later."""
    server = TimedServer()
    server.hold = anyio.Event()
    t = _transcript(server)
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.run)
        await t.beat.hold()
        t.add(text("a"))
        await tg.start(_back, t)  # the flush of "a" goes, and waits on the server
        await server.sending.wait()
        t.add(text("b"))
        await tg.start(_back, t)  # back again while "a" is on its way
        server.hold.set()
        sent_a = anyio.current_time()
        await eventually(lambda: len(server.arrivals) == 2, within=5)
        tg.cancel_scope.cancel()
    assert [[m["content"] for m in batch] for batch in server.batches] == [["a"], ["b"]]
    assert server.arrivals[1] - sent_a < EVERY / 2


async def test_a_released_reader_hands_the_flush_back_to_the_beat() -> None:
    """A reader that stops holding after its read on a beat: what it read leaves at once (a
    beat later, it waited for the flush's own timer), and what it reads from then on leaves on
    the beat."""
    server = TimedServer()
    t = _transcript(server)
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.run)
        await t.beat.hold()
        await anyio.sleep(READ_TAKES)
        t.add(text("held"))
        queued = anyio.current_time()
        t.beat.release()
        await eventually(lambda: len(server.arrivals) == 1, within=5)
        await anyio.sleep(EVERY - anyio.current_time() % EVERY + READ_TAKES)  # past a beat
        t.add(text("as it came"))
        added = anyio.current_time()
        await eventually(lambda: len(server.arrivals) == 2, within=5)
        tg.cancel_scope.cancel()
    assert not t.beat.reader_holds
    assert [[m["content"] for m in batch] for batch in server.batches] == [
        ["held"],
        ["as it came"],
    ]
    assert server.arrivals[0] - queued < EVERY / 2
    assert server.arrivals[1] - added > EVERY / 2  # it waited for the next beat


async def test_a_held_reader_that_does_not_come_back_does_not_keep_its_lines() -> None:
    """A reader that held, read, and then waits for output that does not come: what it read
    leaves a beat late, and the flush keeps its own time from then on."""
    server = TimedServer()
    t = _transcript(server)
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.run)
        await t.beat.hold()
        t.add(text("last"))
        await eventually(lambda: len(server.arrivals) == 1, within=5)
        tg.cancel_scope.cancel()
    assert [m["content"] for m in server.batches[0]] == ["last"]
    assert not t.beat.reader_holds


async def test_a_reader_that_starts_holding_lets_the_flush_go() -> None:
    """What a reader read while it did not hold leaves when it starts holding, not on the
    flush's own timer: those lines may be a beat old already (its read on the beat returned
    only what the pipe's transport had taken in, and it read the rest just after)."""
    server = TimedServer()
    t = _transcript(server)
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.run)
        await anyio.sleep(EVERY - anyio.current_time() % EVERY + READ_TAKES)  # past a beat
        t.add(text("read just after the beat"))
        await anyio.sleep(READ_TAKES)  # the flush now waits for the next beat
        holds = anyio.current_time()
        await tg.start(_back, t)
        await eventually(lambda: len(server.arrivals) == 1, within=5)
        tg.cancel_scope.cancel()
    assert [m["content"] for m in server.batches[0]] == ["read just after the beat"]
    assert server.arrivals[0] - holds < EVERY / 2  # the next beat was EVERY - 2 READ_TAKES away
