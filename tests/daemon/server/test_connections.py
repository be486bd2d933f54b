"""The embedded server under a flood of idle connections: it never runs out of descriptors."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import anyio.to_thread
import httpx
import pytest

from tests.helpers import TOKEN, daemon_env, daemon_process, eventually

pytestmark = pytest.mark.anyio

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
