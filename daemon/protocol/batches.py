"""Transcript batches the server takes: sized by count and bytes, split when refused.

Shared by a task's live transcript and the outbox's leftovers. A batch the server refuses for
what it holds (a 4xx other than a gone task or a refused token) is split in halves and sent
again, so only the message it cannot take is dropped. A batch that may have been stored but
whose answer was lost is given up when the server does not deduplicate (`UnconfirmedError`):
storing a `seq` twice is worse than a gap. Both are counted in the dropped-messages metric by
reason; what a transient failure stops stays with the caller to send later.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemon.errors import PermanentServerError, ServerError, UnconfirmedError
from daemon.logs import short_id
from daemon.ops.metrics import DROP_REASONS, Metrics
from daemon.protocol.api import TaskServer
from daemon.protocol.limits import BATCH_BYTES, input_size
from daemon.protocol.wire import refuses_task

log = logging.getLogger(__name__)

BATCH_MESSAGES = 1000
"""Transcript messages per request at most."""
ENTRY_OVERHEAD = 64
"""Bytes a message costs on the wire besides its text (keys, seq, type, tool)."""
QUEUE_FULL, REFUSED, UNCONFIRMED = DROP_REASONS


def wire_size(entry: Mapping[str, Any]) -> int:
    """An estimate of one message's bytes in a request (its text, not its JSON escapes)."""
    size = len(entry.get("content") or "") + len(entry.get("output") or "") + ENTRY_OVERHEAD
    tool_input = entry.get("input")
    return size + input_size(tool_input) if tool_input else size


def batch_end(sizes: Iterable[int], limit: int = BATCH_MESSAGES) -> int:
    """How many leading messages of these sizes make one batch (at least one)."""
    total = count = 0
    for size in sizes:
        total += size
        if count and (count >= limit or total > BATCH_BYTES):
            break
        count += 1
    return count


@dataclass
class Sent:
    """How one batch went: `handled` leading messages are done with (stored, or dropped and
    counted); `error` is the failure that stopped the rest (to be sent again later); `gone` is
    set when the server takes nothing more for the task; `status` is the task's status as the
    last answer named it (this project's server names it, Multica does not)."""

    handled: int = 0
    error: ServerError | None = None
    gone: PermanentServerError | None = None
    status: str | None = None


async def send_batch(
    client: TaskServer,
    task_id: str,
    batch: Sequence[Mapping[str, Any]],
    metrics: Metrics | None,
    *,
    retry: bool = True,
) -> Sent:
    """Send `batch` (in `seq` order), splitting it where the server refuses a part."""
    sent = Sent()
    await _send(client, task_id, batch, metrics, retry, sent)
    return sent


async def _send(
    client: TaskServer,
    task_id: str,
    part: Sequence[Mapping[str, Any]],
    metrics: Metrics | None,
    retry: bool,
    sent: Sent,
) -> bool:
    """Send one part; False once nothing more can be sent now."""
    try:
        sent.status = await client.send_messages(task_id, part, retry=retry) or sent.status
    except UnconfirmedError as exc:
        _drop(task_id, part, UNCONFIRMED, exc, metrics)
    except PermanentServerError as exc:
        if refuses_task(exc):
            log.warning("transcript %s refused: %s", short_id(task_id), exc)
            sent.gone = exc
            return False
        if len(part) > 1:
            half = len(part) // 2
            return await _send(client, task_id, part[:half], metrics, retry, sent) and await _send(
                client, task_id, part[half:], metrics, retry, sent
            )
        _drop(task_id, part, REFUSED, exc, metrics)
    except ServerError as exc:
        sent.error = exc
        return False
    sent.handled += len(part)
    return True


def _drop(
    task_id: str,
    part: Sequence[Mapping[str, Any]],
    reason: str,
    exc: ServerError,
    metrics: Metrics | None,
) -> None:
    if metrics is not None:
        metrics.transcript_dropped.labels(reason).inc(len(part))
    log.warning(
        "transcript %s: gave up %d messages (seq %s-%s), %s: %s",
        short_id(task_id),
        len(part),
        part[0].get("seq"),
        part[-1].get("seq"),
        reason,
        exc,
    )
