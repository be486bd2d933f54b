"""Heartbeats and requests on the control WebSocket, against scripted servers on loopback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from websockets.asyncio.server import ServerConnection, serve

from daemon.errors import SocketUnavailableError, UnconfirmedError
from daemon.ops.metrics import Metrics
from daemon.protocol.control import ChannelTiming, ControlChannel
from daemon.protocol.control_rpc import RpcAnswer
from daemon.protocol.runtime_models import HeartbeatAck
from daemon.protocol.wire import protocol_headers
from daemon.wakeup import Wakeup
from tests.helpers import eventually

pytestmark = pytest.mark.anyio

Handler = Callable[[ServerConnection, dict[str, Any]], Awaitable[None]]


class Beats:
    """A heartbeat listener that writes down what it heard."""

    def __init__(self) -> None:
        self.acks: list[HeartbeatAck] = []
        self.closed: list[bool] = []

    def acked(self, ack: HeartbeatAck) -> None:
        self.acks.append(ack)

    def socket_closed(self, dropped: bool) -> None:
        self.closed.append(dropped)


def ack(runtime_id: str, *capabilities: str) -> str:
    payload = {"runtime_id": runtime_id, "status": "ok", "server_capabilities": list(capabilities)}
    return json.dumps({"type": "daemon:heartbeat_ack", "payload": payload})


def answer(request_id: str, status: int, body: Any) -> str:
    payload = {"request_id": request_id, "status": status, "body": body}
    return json.dumps({"type": "daemon:rpc_response", "payload": payload})


@asynccontextmanager
async def channel_on(
    on_frame: Handler, *, interval: float = 3600.0
) -> AsyncIterator[tuple[ControlChannel, Beats, list[dict[str, Any]], Metrics]]:
    """A channel for runtimes r1 and r2, connected to a server that hands every frame it
    reads to `on_frame` and keeps it in the yielded list."""
    seen: list[dict[str, Any]] = []

    async def handler(ws: ServerConnection) -> None:
        async for raw in ws:
            frame = json.loads(raw)
            seen.append(frame)
            await on_frame(ws, frame)

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        beats, metrics = Beats(), Metrics()
        channel = ControlChannel(
            f"http://127.0.0.1:{port}",
            protocol_headers("", "test"),
            lambda: ["r2", "r1"],
            Wakeup(),
            timing=ChannelTiming(heartbeat_interval=interval),
            beats=beats,
            metrics=metrics,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(channel.run)
            with anyio.fail_after(10):
                await channel.connected.wait()
            yield channel, beats, seen, metrics
            tg.cancel_scope.cancel()


async def acking(ws: ServerConnection, frame: dict[str, Any]) -> None:
    """Ack each heartbeat saying `rpc-v1`; answer each request 200 with its own body."""
    payload = frame["payload"]
    if frame["type"] == "daemon:heartbeat":
        await ws.send(ack(payload["runtime_id"], "rpc-v1"))
    elif frame["type"] == "daemon:rpc_request":
        await ws.send(answer("someone-else", 200, {"tasks": ["not yours"]}))
        await ws.send(answer(payload["request_id"], 200, payload["body"]))


async def test_heartbeats_go_at_once_and_every_interval_and_their_acks_are_heard() -> None:
    """Each runtime's `daemon:heartbeat` (batch imports said) goes on connecting and again
    every interval; the acks reach the listener; a drop is told as one."""
    async with channel_on(acking, interval=0.05) as (_, beats, seen, _):
        await eventually(lambda: len(seen) >= 4)
        payloads = [{"runtime_id": r, "supports_batch_import": True} for r in ("r1", "r2")]
        assert seen[:2] == [{"type": "daemon:heartbeat", "payload": p} for p in payloads]
        await eventually(lambda: {a.runtime_id for a in beats.acks} == {"r1", "r2"})
        assert beats.acks[0].server_capabilities == ["rpc-v1"]
        assert beats.closed == []


async def test_a_request_goes_only_once_the_server_said_rpc_v1_and_is_matched_by_id() -> None:
    """Before an ack names `rpc-v1` a request never leaves; then it is answered by its own
    id, another id's answer dropped."""
    say_it: list[bool] = []

    async def held(ws: ServerConnection, frame: dict[str, Any]) -> None:
        if frame["type"] == "daemon:heartbeat" and not say_it:
            await ws.send(ack(frame["payload"]["runtime_id"]))  # no rpc-v1 yet
        else:
            await acking(ws, frame)

    async with channel_on(held, interval=0.05) as (channel, beats, seen, _):
        await eventually(lambda: len(beats.acks) >= 2)
        with pytest.raises(SocketUnavailableError):
            await channel.calls.call("tasks.claim", {"max_tasks": 1}, 5.0)
        assert not any(f["type"] == "daemon:rpc_request" for f in seen)
        say_it.append(True)
        await eventually(lambda: channel.calls.ready)
        answered = await channel.calls.call("tasks.claim", {"max_tasks": 3}, 5.0)
    assert (answered.status, answered.body) == (200, {"max_tasks": 3})
    (request,) = [f["payload"] for f in seen if f["type"] == "daemon:rpc_request"]
    assert (request["method"], request["body"], request["timeout_ms"]) == (
        "tasks.claim",
        {"max_tasks": 3},
        5000,
    )


async def test_a_request_left_unanswered_is_unconfirmed_and_its_late_answer_dropped() -> None:
    """No answer within the budget and the grace: unconfirmed (the server may have acted);
    the answer arriving later changes nothing."""
    late: list[str] = []

    async def silent(ws: ServerConnection, frame: dict[str, Any]) -> None:
        if frame["type"] == "daemon:rpc_request":
            late.append(frame["payload"]["request_id"])
        else:
            await acking(ws, frame)

    async with channel_on(silent) as (channel, _, _, _):
        await eventually(lambda: channel.calls.ready)
        with pytest.raises(UnconfirmedError, match="gave no answer"):
            await channel.calls.call("tasks.claim", {}, 0.05, 0.05)
        # What the read loop does with the answer when it comes after all.
        channel.calls.deliver(late[0], RpcAnswer(200, {"tasks": []}))
        assert channel.connected.is_set()


async def test_a_request_whose_connection_closes_is_unconfirmed_at_once() -> None:
    """The connection closing under a request that left: unconfirmed, without waiting out
    the budget; the heartbeat listener hears of the drop."""

    async def closing(ws: ServerConnection, frame: dict[str, Any]) -> None:
        if frame["type"] == "daemon:rpc_request":
            await ws.close()
        else:
            await acking(ws, frame)

    async with channel_on(closing) as (channel, beats, _, _):
        await eventually(lambda: channel.calls.ready)
        with anyio.fail_after(10), pytest.raises(UnconfirmedError, match="closed"):
            await channel.calls.call("tasks.claim", {}, 3600.0)
        await eventually(lambda: beats.closed == [True])
        assert not channel.calls.ready


async def test_an_answer_far_larger_than_64_kib_is_read() -> None:
    """A claim's answer as large as an HTTP one may be (here 2 MiB) arrives whole on the
    socket; Multica's old 64 KiB limit left such a claim made and never read."""
    big = {"tasks": [{"id": "t1", "instructions": "x" * (2 * 1024 * 1024)}]}

    async def bulky(ws: ServerConnection, frame: dict[str, Any]) -> None:
        if frame["type"] == "daemon:rpc_request":
            await ws.send(answer(frame["payload"]["request_id"], 200, big))
        else:
            await acking(ws, frame)

    async with channel_on(bulky) as (channel, _, _, _):
        await eventually(lambda: channel.calls.ready)
        answered = await channel.calls.call("tasks.claim", {}, 5.0)
        assert channel.connected.is_set()
    assert answered.body == big


async def test_malformed_acks_and_answers_are_counted_and_dropped() -> None:
    """An ack or an answer that does not parse is dropped and counted; the connection stays
    up and the request waiting for it ends unconfirmed."""

    async def broken(ws: ServerConnection, frame: dict[str, Any]) -> None:
        if frame["type"] == "daemon:heartbeat":
            bad = {"type": "daemon:heartbeat_ack", "payload": {"runtime_id": ["r1"]}}
            await ws.send(json.dumps(bad))
            await ws.send(ack(frame["payload"]["runtime_id"], "rpc-v1"))
        else:
            request_id = frame["payload"]["request_id"]
            bad = {"type": "daemon:rpc_response", "payload": {"request_id": request_id}}
            await ws.send(json.dumps(bad))

    async with channel_on(broken) as (channel, beats, _, metrics):
        await eventually(lambda: channel.calls.ready and len(beats.acks) == 2)
        with pytest.raises(UnconfirmedError):
            await channel.calls.call("tasks.claim", {}, 0.05, 0.05)
        assert channel.connected.is_set()
    frames = metrics.control_frames
    assert frames.labels("heartbeat_ack", "malformed")._value.get() == 2
    assert frames.labels("rpc_response", "malformed")._value.get() == 1
