"""A task's transcript: numbered once, kept and re-sent with the same seq, capped oldest first.

On trio's virtual clock (`MockClock`, jumping to the next timer whenever every task waits): where
a batch leaves on the beat, and how long a final flush retries, are measured in virtual seconds,
which a loaded machine cannot stretch.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import trio
from trio.testing import MockClock

from backends.base import Message, MessageType
from daemon.errors import TransientServerError
from daemon.ops.metrics import Metrics
from daemon.protocol.limits import BATCH_BYTES, CONTENT_CAP
from daemon.protocol.pacing import Beat
from daemon.shutdown import ShutdownBudget
from daemon.task.transcript import TOOL_OUTPUT_CAP, Transcript, TranscriptLimits
from daemon.testing import FakeTaskServer
from tests.helpers import eventually
from tests.task_steps import TaskSteps

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return "trio", {"clock": MockClock(autojump_threshold=0)}


TASK = "task-1"


def text(content: str) -> Message:
    return Message(MessageType.TEXT, content=content)


def transcript(
    server: FakeTaskServer,
    metrics: Metrics | None = None,
    budget: ShutdownBudget | None = None,
    **limits: Any,
) -> Transcript:
    limited = TranscriptLimits(**limits)
    return Transcript(server, TASK, metrics or Metrics(), budget=budget, limits=limited)


def dropped(metrics: Metrics, reason: str) -> float | None:
    name = "agent_daemon_transcript_messages_dropped_total"
    return metrics.registry.get_sample_value(name, {"reason": reason})


def down() -> TransientServerError:
    return TransientServerError("messages", "connection refused")


async def test_only_transcript_types_are_numbered_and_sent() -> None:
    """text, thinking, tool_use, tool_result and error get seq 1..n; status and log do not."""
    server = FakeTaskServer()
    t = transcript(server)
    t.add(text("a"))
    t.add(Message(MessageType.STATUS, session_id="s"))
    t.add(Message(MessageType.LOG, content="debug"))
    t.add(Message(MessageType.TOOL_USE, tool="Bash", call_id="c", input={"command": "ls"}))
    t.add(Message(MessageType.TOOL_RESULT, call_id="c", output="x"))
    assert await t.flush()
    assert [(m["seq"], m["type"]) for m in server.messages(TASK)] == [
        (1, "text"),
        (2, "tool_use"),
        (3, "tool_result"),
    ]
    assert server.messages(TASK)[1]["input"] == {"command": "ls"}


async def test_failed_batch_is_kept_and_resent_with_the_same_seq() -> None:
    """A transient failure keeps the batch; the re-send carries the same seq and content."""
    server = FakeTaskServer()
    t = transcript(server)
    for word in ("a", "b", "c"):
        t.add(text(word))
    server.fail("send_messages", down())
    assert not await t.flush()
    assert t.unsent == 3
    t.add(text("d"))
    server.heal()
    assert await t.flush()
    assert server.seqs(TASK) == [1, 2, 3, 4]
    assert server.batches[1][:3] == server.batches[0]
    assert t.unsent == 0


async def test_cap_in_messages_drops_the_oldest_and_counts_them() -> None:
    """Past the message cap the oldest unsent messages go, counted in the metric."""
    metrics = Metrics()
    server = FakeTaskServer()
    t = transcript(server, metrics, max_messages=5)
    server.fail("send_messages", down())
    for i in range(1, 9):
        t.add(text(f"m{i}"))
    assert [m["seq"] for m in t.pending()] == [4, 5, 6, 7, 8]
    assert t.dropped == 3
    assert dropped(metrics, "queue_full") == 3


async def test_cap_in_bytes_drops_the_oldest() -> None:
    """Past the byte cap the oldest go too, however few messages are queued."""
    server = FakeTaskServer()
    t = transcript(server, max_bytes=3 * (1000 + 64))
    for i in range(1, 6):
        t.add(text(str(i) * 1000))
    assert [m["seq"] for m in t.pending()] == [3, 4, 5]
    assert t.dropped == 2


async def test_drop_during_a_send_keeps_the_newer_messages() -> None:
    """Messages dropped while their batch is on its way do not take newer unsent ones along."""
    server = FakeTaskServer()
    release = server.hold = anyio.Event()
    t = transcript(server, max_messages=5)
    for i in range(1, 6):
        t.add(text(f"m{i}"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.flush)
        await server.sending.wait()  # seq 1-5 are on their way
        server.hold = None
        for i in range(6, 9):
            t.add(text(f"m{i}"))  # the cap drops 1, 2 and 3 from the queue
        release.set()
    assert server.seqs(TASK) == [1, 2, 3, 4, 5]
    assert t.unsent == 3  # 6-8 go with the next flush
    assert await t.flush()
    assert server.seqs(TASK) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert t.unsent == 0


async def test_permanent_refusal_clears_the_queue_and_stops() -> None:
    """A task the server no longer knows: the queue is emptied and later messages ignored."""
    server = FakeTaskServer()
    t = transcript(server)
    t.add(text("a"))
    server.forget(TASK)
    assert not await t.flush()
    t.add(text("b"))
    assert (t.gone, t.unsent, t.pending()) == (True, 0, [])


async def test_close_gives_up_at_its_bound_and_keeps_what_is_unsent() -> None:
    """The final flush retries only for `within`; the unsent messages stay for the outbox."""
    server = FakeTaskServer()
    server.fail("send_messages", down())
    t = transcript(server)
    t.add(text("a"))
    t.add(text("b"))
    begun = anyio.current_time()
    await t.close(within=0.3)
    took = anyio.current_time() - begun
    assert 0.25 <= took <= 0.3
    assert [m["content"] for m in t.pending()] == ["a", "b"]


async def test_hurry_cuts_a_final_flush_that_is_under_way() -> None:
    """A stopping daemon shortens a 30 s final flush that already began."""
    server = FakeTaskServer()
    server.fail("send_messages", down())
    budget = ShutdownBudget()
    t = transcript(server, budget=budget)
    t.add(text("a"))
    begun = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.close, 30.0)
        await server.sending.wait()
        budget.stop()
    took = anyio.current_time() - begun
    assert took < 5.0
    assert t.unsent == 1


async def test_keep_up_flushes_a_full_queue_on_a_healthy_server() -> None:
    """At the high-water mark the drain waits for a flush, so nothing is dropped."""
    server = FakeTaskServer()
    t = transcript(server, batch_size=2, max_messages=25)
    for i in range(t.high_water):
        t.add(text(str(i)))
    await t.keep_up()
    assert t.unsent == 0 and len(server.messages(TASK)) == t.high_water


async def test_keep_up_does_not_wait_while_the_server_fails() -> None:
    """While the server is failing the drain is never held up; the cap applies instead."""
    server = FakeTaskServer()
    t = transcript(server, batch_size=2)
    server.fail("send_messages", down())
    t.add(text("x"))
    assert not await t.flush()
    for i in range(t.high_water):
        t.add(text(str(i)))
    tries = len(server.batches)
    await t.keep_up()
    assert len(server.batches) == tries


async def test_tool_output_is_capped_and_nul_bytes_removed() -> None:
    """Tool output over 8 KiB is cut with a note; NUL bytes never reach the server."""
    server = FakeTaskServer()
    t = transcript(server)
    t.add(Message(MessageType.TOOL_RESULT, call_id="c", output="x" * 20_000))
    t.add(text("a\x00b"))
    await t.flush()
    output, content = server.messages(TASK)[0]["output"], server.messages(TASK)[1]["content"]
    assert output.startswith("x" * TOOL_OUTPUT_CAP)
    assert output.endswith(f"[{20_000 - TOOL_OUTPUT_CAP} more bytes not sent]")
    assert content == "ab"


async def test_a_refused_message_is_dropped_alone_and_the_transcript_goes_on() -> None:
    """A 400 for one message costs that message only (counted as `refused`); the messages
    around it and after it are stored."""
    metrics = Metrics()
    server = FakeTaskServer()
    server.refuse_messages(lambda m: m["content"] == "poison")
    t = transcript(server, metrics)
    for word in ("a", "b", "poison", "c"):
        t.add(text(word))
    assert await t.flush()
    t.add(text("d"))
    assert await t.flush()
    assert server.seqs(TASK) == [1, 2, 4, 5]
    assert not t.gone
    assert dropped(metrics, "refused") == 1


async def test_long_text_is_capped_and_batches_fit_the_byte_budget() -> None:
    """Text past its cap is cut with a marker; megabyte messages go a few per request."""
    server = FakeTaskServer()
    t = transcript(server)
    for _ in range(10):
        t.add(text("x" * CONTENT_CAP))
    t.add(text("y" * (CONTENT_CAP + 5)))
    assert await t.flush()
    assert server.messages(TASK)[-1]["content"].endswith("[5 more bytes not sent]")
    assert max(len(a) for a in server.batches) <= BATCH_BYTES // CONTENT_CAP


async def test_a_batch_on_its_way_when_the_run_ends_is_offered_once() -> None:
    """Cancelling the periodic flush mid-request lets that batch finish; the final flush sends
    only what came after it."""
    server = FakeTaskServer()
    server.hold = anyio.Event()
    t = Transcript(server, TASK, Metrics(), beat=Beat.every(0.01))
    t.add(text("a"))

    async def stream_until_sending() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(t.run)
            await server.sending.wait()
            t.add(text("b"))
            tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stream_until_sending)
        await anyio.sleep(0.05)
        server.hold.set()
    await t.close(within=5)
    assert [m["seq"] for batch in server.batches for m in batch] == [1, 2]
    assert [m["seq"] for m in server.messages(TASK)] == [1, 2]


class TimedServer(FakeTaskServer):
    """Notes when each batch arrives, on the event loop's clock."""

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[float] = []

    async def send_messages(self, task_id: str, messages: Any, *, retry: bool = True) -> None:
        self.arrivals.append(anyio.current_time())
        await super().send_messages(task_id, messages, retry=retry)


async def test_transcripts_started_apart_flush_on_one_shared_beat() -> None:
    """Two runs started 0.15 s apart send their batches together on the interval's beat: one
    wake-up of the daemon for both, not one each."""
    every = 0.4
    server = TimedServer()
    first, second = (
        Transcript(server, f"task-{n}", Metrics(), beat=Beat.every(every)) for n in (1, 2)
    )
    first.add(text("a"))
    second.add(text("b"))
    await anyio.sleep(every - anyio.current_time() % every)  # just after a beat
    async with anyio.create_task_group() as tg:
        tg.start_soon(first.run)
        await anyio.sleep(0.15)
        tg.start_soon(second.run)
        await eventually(lambda: len(server.arrivals) >= 2, within=5)
        tg.cancel_scope.cancel()
    earlier, later = server.arrivals
    assert later == earlier  # on their own timers they were 0.15 s apart


async def test_a_transcript_sends_at_its_offset_into_the_beat() -> None:
    """A task given an offset flushes that far after each beat of its interval, so tasks given
    other offsets do not all send at one instant."""
    every, offset = 0.4, 0.25
    server = TimedServer()
    t = Transcript(server, TASK, Metrics(), beat=Beat(lambda: every, lambda _: offset))
    t.add(text("a"))
    await anyio.sleep(every - anyio.current_time() % every)  # just after a beat
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.run)
        await eventually(lambda: len(server.arrivals) >= 1, within=5)
        tg.cancel_scope.cancel()
    # On the shared beat it came about 0.4 s after the start, 0.15 s later than asked.
    assert (server.arrivals[0] - offset) % every < 1e-9


async def _quiet_then_one_message(steps: TaskSteps, every: float) -> list[list[str]]:
    server = FakeTaskServer()
    t = Transcript(server, TASK, Metrics(), beat=Beat(lambda: every, lambda _: 0.0))
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.run)
        await anyio.sleep(every)
        trio.lowlevel.add_instrument(steps)
        await anyio.sleep(10 * every)  # ten beats with nothing to send
        trio.lowlevel.remove_instrument(steps)
        t.add(text("a"))
        await eventually(lambda: bool(server.batches), within=5)
        tg.cancel_scope.cancel()
    return [[m["content"] for m in batch] for batch in server.batches]


def test_a_quiet_transcript_sleeps_until_a_message_comes() -> None:
    """Over ten beats with nothing queued the transcript never wakes (it woke on every beat:
    two wake-ups a second per quiet task); the next message still goes out on a beat."""
    steps = TaskSteps()
    sent = anyio.run(_quiet_then_one_message, steps, 0.05, backend="trio")
    assert steps.steps <= 2  # this test's own sleep; the transcript's would be 10 more
    assert sent == [["a"]]


async def test_messages_arriving_during_a_flush_wait_for_the_next_one() -> None:
    """A flush sends what was queued when it began; what the agent prints while that batch is
    on its way goes with the next flush, not in an extra request right after."""
    server = FakeTaskServer()
    server.hold = anyio.Event()
    t = transcript(server)
    t.add(text("a"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(t.flush)
        await server.sending.wait()
        t.add(text("b"))
        t.add(text("c"))
        server.hold.set()
    assert [[m["content"] for m in batch] for batch in server.batches] == [["a"]]
    assert t.unsent == 2
    assert await t.flush()
    assert [m["content"] for m in server.batches[-1]] == ["b", "c"]


async def test_lag_is_how_long_the_oldest_unsent_message_has_waited() -> None:
    """0 with nothing queued; grows while the server does not take the queue; back to 0 once it
    has, and what came during a flush counts from that flush's start."""
    now = [100.0]
    server = FakeTaskServer()
    t = Transcript(server, TASK, Metrics(), clock=lambda: now[0])
    assert t.lag() == 0.0
    t.add(text("a"))
    now[0] += 2.0
    t.add(text("b"))
    assert t.lag() == 2.0
    server.fail("send_messages", down())
    assert not await t.flush()
    now[0] += 3.0
    assert t.lag() == 5.0
    server.heal()
    assert await t.flush()
    assert t.lag() == 0.0
    t.add(text("c"))
    now[0] += 0.5
    assert t.lag() == 0.5
