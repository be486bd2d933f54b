"""The embedded server under a flood of idle connections: it never runs out of descriptors."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

from daemon.server.connections import guarded_protocol
from tests.fakes.loopback import serve_app
from tests.helpers import TOKEN, daemon_env, daemon_process, eventually

pytestmark = pytest.mark.anyio


async def _hello(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (EOF or a reset waiting)."""
    sock.settimeout(0.01)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


OPEN_FILES = 256


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _hold_idle(port: int, count: int) -> list[socket.socket]:
    """Open up to `count` connections that send one byte of a request head, then nothing."""
    held = []
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1)
            sock.sendall(b"G")
        except OSError:
            continue  # the listen queue is full: the flood is as big as it gets
        held.append(sock)
    return held


async def test_idle_connections_past_the_open_file_limit_never_silence_it(tmp_path: Path) -> None:
    """`agent-daemon server` with 256 descriptors and 400 idle connections opened on it still
    answers a real request (the oldest idle ones make room), and logs no flood doing so."""
    port = _free_port()
    env = daemon_env(tmp_path, "", MULTICA_EMBEDDED_LISTEN=f"127.0.0.1:{port}")
    del env["MULTICA_SERVER_URL"]
    url = f"http://127.0.0.1:{port}/api/tasks"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    log = tmp_path / "server.log"
    limited = ["prlimit", f"--nofile={OPEN_FILES}:{OPEN_FILES}", sys.executable]
    async with (
        daemon_process(env, "server", log=log, python=limited),
        httpx.AsyncClient(timeout=3) as http,
    ):

        async def answered() -> bool:
            try:
                return (await http.get(url, headers=auth)).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(answered, within=30, every=0.1)
        held = await anyio.to_thread.run_sync(_hold_idle, port, 400)
        try:
            await eventually(answered, within=15, every=0.2)
        finally:
            for sock in held:
                sock.close()
    assert log.stat().st_size < 64 * 1024, log.read_text()[-2000:]


async def test_a_silent_connection_is_closed_and_the_oldest_makes_room() -> None:
    """A connection that sends no whole request head is closed after the head timeout; past
    the limit the oldest still waiting is closed for the newcomer, and requests are answered."""
    protocol = guarded_protocol(4, head_timeout=2.0)
    # Each request on a connection of its own: a kept-alive one is itself silent between
    # requests, and the server closes it on the same deadline, as a request may be on its way.
    fresh = httpx.Limits(max_keepalive_connections=0)
    async with (
        serve_app(_hello, http=protocol) as url,
        httpx.AsyncClient(timeout=5, limits=fresh) as http,
    ):
        port = int(url.rsplit(":", 1)[1])
        held = await anyio.to_thread.run_sync(_hold_idle, port, 6)
        try:
            await eventually(lambda: [_closed(s) for s in held[:2]] == [True, True], within=1.5)
            assert not any(_closed(s) for s in held[2:])
            assert (await http.get(url)).text == "hello"
            await eventually(lambda: all(_closed(s) for s in held), within=6)
            assert (await http.get(url)).text == "hello"
        finally:
            # Also when failing: unclosed, they fail whichever test runs when they are collected.
            for sock in held:
                sock.close()
