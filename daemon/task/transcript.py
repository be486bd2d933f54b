"""A task's live transcript: numbered, cleaned, batched to the server, kept while it is down.

Messages get increasing `seq` numbers as they arrive. Every `interval` (500 ms) and at the end
the unsent ones go out in batches. A batch that fails transiently stays queued and is re-sent
with the same `seq` numbers, so a server blip loses nothing and the server's once-per-`(task,
seq)` storage removes duplicates. While the server is down the queue is capped in messages and
bytes; past the cap the oldest are dropped and counted. What is still unsent when the run ends
(`pending()`) goes into the durable outbox with the task's terminal report.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from itertools import islice
from typing import Any

import anyio

from backends.base import Message, MessageType
from daemon.errors import PermanentServerError, ServerError
from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.protocol.api import TaskServer
from daemon.protocol.retry import RetryPolicy
from daemon.shutdown import TRANSCRIPT_FLUSH, ShutdownBudget

log = logging.getLogger(__name__)

TOOL_OUTPUT_CAP = 8 * 1024
CLOSE_RETRY = RetryPolicy((1.0,), max_tries=0, growth=1.0, jitter=0.0)
"""The final flush tries again every second until its deadline."""
_SENT_TYPES = frozenset(
    {
        MessageType.TEXT,
        MessageType.THINKING,
        MessageType.TOOL_USE,
        MessageType.TOOL_RESULT,
        MessageType.ERROR,
    }
)


def clean(text: str) -> str:
    """Drop NUL bytes and lone surrogates, which JSON decoding can let through."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    if text.isascii():  # the common case, and it cannot hold a surrogate
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def cap(text: str, limit: int = TOOL_OUTPUT_CAP) -> str:
    """Cut `text` to at most `limit` UTF-8 bytes, saying how much was cut."""
    if len(text) * 4 <= limit:  # no UTF-8 character is longer than 4 bytes
        return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n… [{len(data) - limit} more bytes not sent]"


class Transcript:
    """Numbers, cleans and batches one task's messages to the server."""

    def __init__(
        self,
        client: TaskServer,
        task_id: str,
        metrics: Metrics,
        *,
        budget: ShutdownBudget | None = None,
        interval: float | Callable[[], float] = 0.5,
        batch_size: int = 1000,
        max_messages: int = 100_000,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self._client = client
        self._task_id = task_id
        self._metrics = metrics
        # A callable is asked before each wait: the pause grows with the daemon's load.
        self._interval = interval if callable(interval) else (lambda: interval)
        self._batch_size = batch_size
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._queue: deque[tuple[dict[str, Any], int]] = deque()
        self._queued_bytes = 0
        self._next_seq = 1
        self._lock = anyio.Lock()
        self.sent = 0
        self.dropped = 0
        self.gone = False
        self._failing = False
        self.high_water = batch_size * 10
        self._budget = budget or ShutdownBudget()

    def add(self, message: Message) -> None:
        """Queue one message if it belongs in the transcript (status and log do not)."""
        if message.type not in _SENT_TYPES or self.gone:
            return
        output = cap(clean(message.output)) if message.output else ""
        content = clean(message.content) if message.content else ""
        # A plain dict in the wire shape of `TranscriptMessage`: building a model per message
        # costs more than the rest of the drain loop together.
        entry: dict[str, Any] = {
            "seq": self._next_seq,
            "type": message.type.value,
            "tool": message.tool,
            "content": content,
            "output": output,
        }
        if message.input is not None:
            entry["input"] = dict(message.input)
        self._next_seq += 1
        size = len(content) + len(output) + 64
        self._queue.append((entry, size))
        self._queued_bytes += size
        while len(self._queue) > self._max_messages or self._queued_bytes > self._max_bytes:
            _, dropped_size = self._queue.popleft()
            self._queued_bytes -= dropped_size
            self.dropped += 1
            self._metrics.transcript_dropped.inc()

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

    def pending(self) -> list[dict[str, Any]]:
        """The messages not yet accepted, in `seq` order, in their wire shape."""
        return [entry for entry, _ in self._queue]

    async def run(self) -> None:
        """Flush every interval until cancelled."""
        while True:
            await anyio.sleep(self._interval())
            await self.flush()

    async def flush(self) -> bool:
        """Send everything queued; False if something is still unsent (server trouble)."""
        async with self._lock:
            while self._queue and not self.gone:
                batch = [entry for entry, _ in islice(self._queue, self._batch_size)]
                try:
                    await self._client.send_messages(self._task_id, batch)
                except PermanentServerError as exc:
                    # The server refuses this task's transcript for good (task gone, 4xx):
                    # keeping it would only grow memory.
                    log.warning("transcript %s refused: %s", short_id(self._task_id), exc)
                    self.gone = True
                    self._queue.clear()
                    self._queued_bytes = 0
                    return False
                except ServerError as exc:
                    self._failing = True
                    log.info(
                        "transcript %s: %d messages kept for retry: %s",
                        short_id(self._task_id),
                        len(self._queue),
                        exc,
                    )
                    return False
                self._failing = False
                # By `seq`, not by count: while the batch was on its way the cap may have
                # dropped some of its oldest entries, and the newer ones behind must stay.
                last = batch[-1]["seq"]
                while self._queue and self._queue[0][0]["seq"] <= last:
                    _, size = self._queue.popleft()
                    self._queued_bytes -= size
                    self.sent += 1
            return not self._queue

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
