"""A task's live transcript: numbered, cleaned, capped, batched to the server, kept while it is
down.

Messages get increasing `seq` numbers as they arrive; every field is cut to its cap
(daemon/protocol/limits.py). Every `interval` (500 ms) and at the end the unsent ones go out in
batches sized by count and bytes (daemon/protocol/batches.py). A batch that fails transiently
stays queued and is re-sent with the same `seq` numbers — by the client only where the server
stores each `(task, seq)` once, or where the request surely never reached it. A message the
server refuses is dropped alone and counted. While the server is down the queue is capped in
messages and bytes; past the cap the oldest are dropped and counted. What is still unsent when
the run ends (`pending()`) goes into the durable outbox with the task's terminal report.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice, takewhile
from typing import Any

import anyio
from anyio.lowlevel import checkpoint_if_cancelled

from backends.base import Message, MessageType
from daemon.errors import TransientServerError
from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.protocol.api import TaskServer
from daemon.protocol.batches import (
    BATCH_MESSAGES,
    ENTRY_OVERHEAD,
    QUEUE_FULL,
    Sent,
    batch_end,
    send_batch,
)
from daemon.protocol.limits import (
    CONTENT_CAP,
    NAME_CAP,
    TOOL_OUTPUT_CAP,
    bounded_input,
    cap,
    clean,
)
from daemon.protocol.pacing import TRANSCRIPT_BEAT, Beat
from daemon.protocol.retry import RetryPolicy
from daemon.shutdown import TRANSCRIPT_FLUSH, ShutdownBudget
from daemon.task.shared_beat import SharedBeat

log = logging.getLogger(__name__)

__all__ = ["CLOSE_RETRY", "TOOL_OUTPUT_CAP", "Transcript", "TranscriptLimits"]

CLOSE_RETRY = RetryPolicy((1.0,), max_tries=0, growth=1.0, jitter=0.0)
"""The final flush tries again every second until its deadline."""
IN_FLIGHT = 30.0
"""Seconds a batch on its way may still take once its run was cancelled: as long as the final
flush may take (daemon/task/reporter.py `TRANSCRIPT_CLOSE`)."""
_SENT_TYPES = frozenset(
    {
        MessageType.TEXT,
        MessageType.THINKING,
        MessageType.TOOL_USE,
        MessageType.TOOL_RESULT,
        MessageType.ERROR,
    }
)


@dataclass(frozen=True, slots=True)
class TranscriptLimits:
    """How much a transcript sends at once and keeps while the server does not take it."""

    batch_size: int = BATCH_MESSAGES
    """Messages in one batch at most (a batch is also cut by bytes)."""
    max_messages: int = 100_000
    """Messages kept unsent at most; past it the oldest are dropped and counted."""
    max_bytes: int = 64 * 1024 * 1024
    """Bytes kept unsent at most, likewise."""


class Transcript:
    """Numbers, cleans and batches one task's messages to the server."""

    def __init__(
        self,
        client: TaskServer,
        task_id: str,
        metrics: Metrics,
        *,
        budget: ShutdownBudget | None = None,
        beat: Beat = TRANSCRIPT_BEAT,
        limits: TranscriptLimits = TranscriptLimits(),
        told: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`told` hears the task's status whenever the server's answer names it; `beat` says
        when its batches leave (pacing.py)."""
        self._client = client
        self._told = told
        self._task_id = task_id
        self._metrics = metrics
        self.beat = SharedBeat(beat)
        """Its beat, which its agent's held reads share (`RunSpec.read_beat`)."""
        self._batch_size = limits.batch_size
        self._max_messages = limits.max_messages
        self._max_bytes = limits.max_bytes
        self._queue: deque[tuple[dict[str, Any], int]] = deque()
        self._queued_bytes = 0
        self._next_seq = 1
        self._clock = clock
        self._oldest_at = 0.0
        """When the oldest unsent message arrived, or a moment before (read with a queue)."""
        # A free lock taken without yielding first: anyio's default gives up the turn once
        # more on every flush, two of them a second per running task.
        self._lock = anyio.Lock(fast_acquire=True)
        self._queued = anyio.Event()
        """Set when a message is queued into an empty queue (`run` waits for it)."""
        self.sent = 0
        self.dropped = 0
        self.gone = False
        self._failing = False
        self.high_water = limits.batch_size * 10
        self._budget = budget or ShutdownBudget()

    def add(self, message: Message) -> None:
        """Queue one message if it belongs in the transcript (status and log do not)."""
        if message.type not in _SENT_TYPES or self.gone:
            return
        output = clean(message.output) if message.output else ""
        content = clean(message.content) if message.content else ""
        tool = message.tool
        # Length checks first (no UTF-8 character is over 4 bytes): this is the drain's hot
        # path, and nearly every message is far below its caps.
        if len(output) * 4 > TOOL_OUTPUT_CAP:
            output = cap(output, TOOL_OUTPUT_CAP)
        if len(content) * 4 > CONTENT_CAP:
            content = cap(content, CONTENT_CAP)
        if len(tool) * 4 > NAME_CAP:
            tool = cap(tool, NAME_CAP)
        # A plain dict in the wire shape of `TranscriptMessage`: building a model per message
        # costs more than the rest of the drain loop together.
        entry: dict[str, Any] = {
            "seq": self._next_seq,
            "type": message.type.value,
            "tool": tool,
            "content": content,
            "output": output,
        }
        size = len(content) + len(output) + ENTRY_OVERHEAD
        if message.input is not None:
            entry["input"], input_bytes = bounded_input(message.input)
            size += input_bytes
        self._next_seq += 1
        if not self._queue:
            # Stamped only when the queue fills from empty: the clock stays off the hot path.
            self._oldest_at = self._clock()
            self._queued.set()
        self._queue.append((entry, size))
        self._queued_bytes += size
        while len(self._queue) > self._max_messages or self._queued_bytes > self._max_bytes:
            _, dropped_size = self._queue.popleft()
            self._queued_bytes -= dropped_size
            self.dropped += 1
            self._metrics.transcript_dropped.labels(QUEUE_FULL).inc()

    async def keep_up(self) -> None:
        """Backpressure: while the server takes batches, never let the queue outgrow them.

        An agent can print faster than the server stores; without this the queue would reach
        the cap and drop messages on a healthy server. While the server is failing the drain
        must not stall (the watchdog and the agent keep going), so the cap applies instead.
        """
        if len(self._queue) >= self.high_water and not self._failing:
            await self.flush()

    @property
    def unsent(self) -> int:
        """Messages numbered but not yet accepted by the server."""
        return len(self._queue)

    def lag(self) -> float:
        """Seconds the oldest message the server has not taken has waited, at most (0: none)."""
        return max(0.0, self._clock() - self._oldest_at) if self._queue else 0.0

    def pending(self) -> list[dict[str, Any]]:
        """The messages not yet accepted, in `seq` order, in their wire shape."""
        return [entry for entry, _ in self._queue]

    async def run(self) -> None:
        """Flush on each beat while messages are queued, until cancelled.

        With nothing queued it waits for the next message instead: a task whose agent is
        quiet (thinking, or in a long tool call) costs no wake-ups. Waking on every beat
        regardless took 200 quiet tasks 400 wake-ups a second, ~4 % of a core. While the
        agent's reads are held for the beat, the flush follows the read on each beat
        (shared_beat.py)."""
        while True:
            if not self._queue and not self.beat.reader_holds:
                self._queued = anyio.Event()
                await self._queued.wait()
            await self.beat.next_flush()
            await self.flush()

    async def flush(self) -> bool:
        """Send everything queued when the flush began; False if some of it is still unsent
        (server trouble).

        Messages that arrive while it sends wait for the next flush: on the shared beat the
        daemon's requests go out together and take longer to answer, and sending what came
        meanwhile at once made up to 40 % more requests, each with a message or two."""
        async with self._lock:
            if not self._queue:
                return True
            begun = self._clock()
            last = self._queue[-1][0]["seq"]
            while self._queue and self._queue[0][0]["seq"] <= last and not self.gone:
                due = takewhile(lambda item: item[0]["seq"] <= last, self._queue)
                count = batch_end((size for _, size in due), self._batch_size)
                batch = [entry for entry, _ in islice(self._queue, count)]
                sent = await self._send(batch)
                if sent.status is not None and self._told is not None:
                    self._told(sent.status)
                if sent.handled:
                    self._forget(through=batch[sent.handled - 1]["seq"])
                if sent.gone is not None:
                    # The task is gone or no longer ours: keeping its transcript would only
                    # grow memory.
                    self.gone = True
                    self._queue.clear()
                    self._queued_bytes = 0
                    return False
                self._failing = sent.error is not None
                if sent.error is not None:
                    log.info(
                        "transcript %s: %d messages kept for retry: %s",
                        short_id(self._task_id),
                        len(self._queue),
                        sent.error,
                    )
                    return False
            # What is left came while this flush sent: after it began.
            self._oldest_at = begun
            return True

    async def _send(self, batch: list[dict[str, Any]]) -> Sent:
        """Send one batch; once on its way, the run's end does not cut it.

        Multica stores every batch it reads (no `(task, seq)` dedupe): a batch cut after the
        server read it, when the agent exits or the server cancels the task, would be sent
        again by the final flush and stored twice. So the send is shielded, bounded by its own
        deadline, the caller's (the final flush's) and a stopping daemon's allowance; a batch
        cut by one of those stays queued, as after a transient failure.
        """
        await checkpoint_if_cancelled()  # cancelled before it started: nothing is on its way
        deadline = min(anyio.current_effective_deadline(), anyio.current_time() + IN_FLIGHT)
        with (
            anyio.CancelScope(shield=True, deadline=deadline) as scope,
            self._budget.bounding(scope, TRANSCRIPT_FLUSH),
        ):
            return await send_batch(self._client, self._task_id, batch, self._metrics)
        return Sent(error=TransientServerError("messages", "cut at its deadline"))

    def _forget(self, through: int) -> None:
        """Forget the messages up to `seq` `through`, which the server took or were given up."""
        # By `seq`, not by count: while the batch was on its way the cap may have dropped
        # some of its oldest entries, and the newer ones behind must stay.
        while self._queue and self._queue[0][0]["seq"] <= through:
            _, size = self._queue.popleft()
            self._queued_bytes -= size
            self.sent += 1

    async def close(self, within: float) -> None:
        """Final flush at the end of a run, retried for `within` seconds, shielded.

        What is still unsent afterwards stays in `pending()` for the outbox.
        """
        # A stopping daemon cuts this flush short; the outbox keeps what is left.
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(within) as scope,
            self._budget.bounding(scope, TRANSCRIPT_FLUSH),
        ):
            failures = 0
            while not await self.flush():
                if self.gone:
                    return
                failures += 1
                await CLOSE_RETRY.sleep(CLOSE_RETRY.delay(failures) or 0.0)
        if self._queue:
            log.warning(
                "transcript %s: %d messages unsent at the end of the run",
                short_id(self._task_id),
                len(self._queue),
            )
