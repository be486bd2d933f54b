"""Transcript batches: sized by bytes, split where refused, given up when unconfirmed."""

from __future__ import annotations

from typing import Any

import pytest

from daemon.errors import (
    PermanentServerError,
    TaskGoneError,
    TransientServerError,
    UnconfirmedError,
)
from daemon.ops.metrics import Metrics
from daemon.protocol.batches import BATCH_MESSAGES, batch_end, send_batch, wire_size
from daemon.protocol.limits import BATCH_BYTES
from daemon.testing import FakeTaskServer

pytestmark = pytest.mark.anyio

TASK = "task-1"


def refusing(poisoned: set[int]) -> FakeTaskServer:
    """A server that refuses (400) every batch holding one of the `poisoned` seqs."""
    server = FakeTaskServer()
    server.refuse_messages(lambda m: m["seq"] in poisoned)
    return server


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
    server, metrics = refusing({37}), Metrics()
    sent = await send_batch(server, TASK, messages(100), metrics)
    assert (sent.handled, sent.error, sent.gone) == (100, None, None)
    assert server.seqs(TASK) == [s for s in range(1, 101) if s != 37]
    assert dropped(metrics, "refused") == 1
    assert server.count("send_messages") <= 2 * 7 + 1  # halving: about two requests per level


async def test_an_unconfirmed_batch_is_given_up_and_counted() -> None:
    """A batch that may be stored (answer lost, no dedupe) is not kept for a re-send."""
    server, metrics = FakeTaskServer(), Metrics()
    server.fail("send_messages", UnconfirmedError("messages", "ReadTimeout"))
    sent = await send_batch(server, TASK, messages(5), metrics)
    assert (sent.handled, sent.error) == (5, None)
    assert dropped(metrics, "unconfirmed") == 5


async def test_a_transient_failure_keeps_the_rest_for_later() -> None:
    """A failure that surely stored nothing hands the batch back, nothing dropped."""
    server, metrics = FakeTaskServer(), Metrics()
    failure = TransientServerError("messages", "ConnectError")
    server.fail("send_messages", failure)
    sent = await send_batch(server, TASK, messages(5), metrics)
    assert (sent.handled, sent.error) == (0, failure)
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
    server = FakeTaskServer()
    server.fail("send_messages", refusal)
    sent = await send_batch(server, TASK, messages(64), Metrics())
    assert (sent.handled, sent.gone, server.count("send_messages")) == (0, refusal, 1)
