"""Transcript batches: sized by bytes, split where refused, given up when unconfirmed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from daemon.errors import (
    PermanentServerError,
    ServerError,
    TaskGoneError,
    TransientServerError,
    UnconfirmedError,
)
from daemon.ops.metrics import Metrics
from daemon.protocol.batches import BATCH_MESSAGES, batch_end, send_batch, wire_size
from daemon.protocol.limits import BATCH_BYTES

pytestmark = pytest.mark.anyio


class RefusingServer:
    """Stores batches unless they hold a poisoned message (400), or fails them on demand."""

    def __init__(self, poisoned: set[int] | None = None) -> None:
        self.poisoned = poisoned or set()
        self.failure: ServerError | None = None
        self.stored: list[int] = []
        self.requests = 0

    async def send_messages(
        self, task_id: str, batch: Sequence[Mapping[str, Any]], *, retry: bool = True
    ) -> None:
        self.requests += 1
        if self.failure is not None:
            raise self.failure
        if any(m["seq"] in self.poisoned for m in batch):
            raise PermanentServerError("messages", "input: invalid", 400)
        self.stored.extend(m["seq"] for m in batch)


def messages(count: int) -> list[dict[str, Any]]:
    return [{"seq": i, "type": "text", "content": f"m{i}"} for i in range(1, count + 1)]


def dropped(metrics: Metrics, reason: str) -> float | None:
    name = "agent_daemon_transcript_messages_dropped_total"
    return metrics.registry.get_sample_value(name, {"reason": reason})


def test_a_batch_ends_at_the_byte_budget_or_the_count() -> None:
    """Megabyte messages go a few to a batch; small ones up to the count; never zero."""
    assert batch_end([1024 * 1024] * 20) == BATCH_BYTES // (1024 * 1024)
    assert batch_end([100] * 5000) == BATCH_MESSAGES
    assert batch_end([BATCH_BYTES * 3, 10]) == 1
    assert batch_end([]) == 0


def test_wire_size_counts_text_and_tool_input() -> None:
    """The estimate grows with content, output and the input's JSON."""
    small = wire_size({"seq": 1, "type": "text", "content": "ab"})
    with_input = wire_size({"seq": 1, "type": "tool_use", "input": {"command": "x" * 100}})
    assert with_input - small > 100


async def test_a_refused_batch_is_split_and_only_the_offender_dropped() -> None:
    """One message the server refuses costs only itself, counted as `refused`."""
    server, metrics = RefusingServer(poisoned={37}), Metrics()
    sent = await send_batch(server, "task-1", messages(100), metrics)
    assert (sent.handled, sent.error, sent.gone) == (100, None, None)
    assert server.stored == [s for s in range(1, 101) if s != 37]
    assert dropped(metrics, "refused") == 1
    assert server.requests <= 2 * 7 + 1  # halving: about two requests per level


async def test_an_unconfirmed_batch_is_given_up_and_counted() -> None:
    """A batch that may be stored (answer lost, no dedupe) is not kept for a re-send."""
    server, metrics = RefusingServer(), Metrics()
    server.failure = UnconfirmedError("messages", "ReadTimeout")
    sent = await send_batch(server, "task-1", messages(5), metrics)
    assert (sent.handled, sent.error) == (5, None)
    assert dropped(metrics, "unconfirmed") == 5


async def test_a_transient_failure_keeps_the_rest_for_later() -> None:
    """A failure that surely stored nothing hands the batch back, nothing dropped."""
    server, metrics = RefusingServer(), Metrics()
    server.failure = TransientServerError("messages", "ConnectError")
    sent = await send_batch(server, "task-1", messages(5), metrics)
    assert (sent.handled, sent.error) == (0, server.failure)
    assert dropped(metrics, "refused") == dropped(metrics, "unconfirmed") == 0


@pytest.mark.parametrize(
    "refusal",
    [
        TaskGoneError("messages", "task not found", 404),
        PermanentServerError("messages", "forbidden", 403),
        PermanentServerError("messages", "unauthorized", 401),
    ],
)
async def test_a_gone_task_or_refused_token_is_not_split(refusal: PermanentServerError) -> None:
    """A refusal of the task itself ends the sending at once: no halving, no drop counted."""
    server = RefusingServer()
    server.failure = refusal
    sent = await send_batch(server, "task-1", messages(64), Metrics())
    assert (sent.handled, sent.gone, server.requests) == (0, refusal, 1)
