"""The control WebSocket client against the real embedded server on loopback."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup
from websockets.asyncio.server import ServerConnection, serve

from daemon.protocol.control import ControlChannel, ws_url
from daemon.protocol.wire import protocol_headers
from daemon.wakeup import Wakeup
from tests.daemon.server.helpers import register_http
from tests.helpers import TOKEN, embedded_server, eventually, server_client

pytestmark = pytest.mark.anyio


def test_ws_url_follows_the_server_scheme_and_path() -> None:
    """http becomes ws and https wss; a base path is kept."""
    assert ws_url("http://127.0.0.1:8080") == "ws://127.0.0.1:8080/api/daemon/ws"
    assert ws_url("https://multica.example/base/") == "wss://multica.example/base/api/daemon/ws"


async def test_channel_reconnects_for_a_changed_runtime_set(tmp_path: Path) -> None:
    """After `runtimes_changed`, frames for a runtime added to the set wake the daemon."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        server_client(url) as http,
    ):
        ids = await register_http(http, "d1", "claude", "codex")
        current = [ids["claude"]]
        wakeup = Wakeup()
        channel = ControlChannel(url, protocol_headers(TOKEN, "test"), lambda: current, wakeup)
        async with anyio.create_task_group() as tg:
            first = await _opened(tg, channel, wakeup)
            current = [ids["claude"], ids["codex"]]
            channel.runtimes_changed()
            await eventually(lambda: channel.connected is not first and channel.connected.is_set())
            await wakeup.wait(0)
            await http.post("/api/tasks", json={"prompt": "p", "backend": "codex"})
            assert await wakeup.wait(10)
            tg.cancel_scope.cancel()


async def test_channel_ignores_frames_it_does_not_know() -> None:
    """Unknown types, non-JSON and odd payloads leave the connection up; a known frame wakes."""
    go = anyio.Event()

    async def handler(ws: ServerConnection) -> None:
        for frame in ('{"type": "daemon:hello"}', "not json", "[1]", '{"type": 3}'):
            await ws.send(frame)
        await go.wait()
        await ws.send('{"type": "daemon:task_available", "payload": {"task_id": "t1"}}')
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        wakeup = Wakeup()
        channel = ControlChannel(
            f"http://127.0.0.1:{port}", protocol_headers("", "test"), lambda: ["r1"], wakeup
        )
        async with anyio.create_task_group() as tg:
            first = await _opened(tg, channel, wakeup)
            go.set()
            assert await wakeup.wait(10)
            assert channel.connected is first and first.is_set()
            tg.cancel_scope.cancel()


class _Recorded:
    """A push handler that writes down what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def workspaces_changed(self) -> None:
        self.calls.append(("workspaces",))

    def pending_work(self, runtime_id: str, kind: str) -> None:
        self.calls.append(("pending", runtime_id, kind))

    def runtime_profiles_changed(self, workspace_id: str) -> None:
        self.calls.append(("profiles", workspace_id))

    def reconnected(self) -> None:
        self.calls.append(("opened",))


async def test_pushes_reach_their_handler_and_malformed_ones_do_not() -> None:
    """The channel's opening, `workspaces_changed`, `pending_work` and
    `runtime_profiles_changed` go to the push handler in order; a frame without its runtime
    or workspace id, or with a field of the wrong type, is dropped; none wakes the claim."""
    frames = (
        '{"type": "daemon:workspaces_changed", "payload": {}}',
        '{"type": "daemon:pending_work", "payload": {"runtime_id": "r1", "kind": "model_list"}}',
        '{"type": "daemon:pending_work", "payload": {"kind": "model_list"}}',
        '{"type": "daemon:pending_work", "payload": {"runtime_id": 7}}',
        '{"type": "daemon:pending_work", "payload": "r1"}',
        '{"type": "daemon:pending_work", "payload": {"runtime_id": "r1", "kind": 3}}',
        '{"type": "daemon:runtime_profiles_changed", "payload": {"workspace_id": "w1"}}',
        '{"type": "daemon:runtime_profiles_changed", "payload": {"workspace_id": 5}}',
        '{"type": "daemon:runtime_profiles_changed", "payload": {"runtime_profile_id": "p"}}',
        '{"type": "daemon:workspaces_changed"}',
    )

    async def handler(ws: ServerConnection) -> None:
        for frame in frames:
            await ws.send(frame)
        await ws.wait_closed()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        wakeup, pushes = Wakeup(), _Recorded()
        channel = ControlChannel(
            f"http://127.0.0.1:{port}",
            protocol_headers("", "test"),
            lambda: ["r1"],
            wakeup,
            pushes=pushes,
        )
        async with anyio.create_task_group() as tg:
            await _opened(tg, channel, wakeup)
            await eventually(lambda: len(pushes.calls) == 5)
            assert pushes.calls == [
                ("opened",),
                ("workspaces",),
                ("pending", "r1", "model_list"),
                ("profiles", "w1"),
                ("workspaces",),
            ]
            assert not await wakeup.wait(0)
            tg.cancel_scope.cancel()


async def _opened(tg: TaskGroup, channel: ControlChannel, wakeup: Wakeup) -> anyio.Event:
    """Run `channel` in `tg` until connected; take the claim every (re)connection asks for."""
    tg.start_soon(channel.run)
    with anyio.fail_after(10):
        await channel.connected.wait()
    await wakeup.wait(0)
    return channel.connected
