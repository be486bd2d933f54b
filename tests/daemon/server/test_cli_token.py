"""The quickstart stays two commands: `run` makes the embedded server's token, `submit` finds it."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from tests.helpers import ROOT, daemon_env, daemon_process, eventually

pytestmark = pytest.mark.anyio


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _embedded_env(home: Path, port: int) -> dict[str, str]:
    """A daemon environment with no server URL and no token: the quickstart's."""
    env = daemon_env(home, "", MULTICA_EMBEDDED_LISTEN=f"127.0.0.1:{port}")
    del env["MULTICA_SERVER_URL"], env["MULTICA_DAEMON_TOKEN"]
    return env


async def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return await anyio.run_process(
        [sys.executable, "-m", "daemon", *args],
        env={**env, "PYTHONPATH": str(ROOT)},
        check=False,
    )


async def test_run_then_submit_work_without_any_token_setting(tmp_path: Path) -> None:
    """`agent-daemon run` generates server.token (0600); `submit --wait` uses it unasked; a
    request without it is refused."""
    port = _free_port()
    env = _embedded_env(tmp_path, port)
    token_file = tmp_path / "state" / "server.token"
    async with daemon_process(env, "run"):

        async def answering() -> bool:
            try:
                async with httpx.AsyncClient() as http:
                    got = await http.get(f"http://127.0.0.1:{port}/api/tasks")
            except httpx.TransportError:
                return False
            return got.status_code == 401

        await eventually(answering, within=30, every=0.1)
        prompt = json.dumps({"steps": [{"result": {"output": "quickstart ok"}}]})
        with anyio.fail_after(60):
            done = await _cli(env, "submit", "--backend", "scripted", "--wait", prompt)
    assert done.returncode == 0, done.stderr.decode()
    assert "quickstart ok" in done.stdout.decode()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


async def test_submit_before_any_server_says_what_to_start(tmp_path: Path) -> None:
    """With no token file yet, submit exits 1 with one line naming the file and the fix."""
    env = _embedded_env(tmp_path, _free_port())
    answer = await _cli(env, "submit", "hello")
    assert answer.returncode == 1
    assert "no server token in" in answer.stderr.decode()
    assert "agent-daemon run" in answer.stderr.decode()
    assert not (tmp_path / "state" / "server.token").exists()


async def test_an_explicit_token_is_used_by_server_and_submit(tmp_path: Path) -> None:
    """MULTICA_DAEMON_TOKEN set: `agent-daemon server` uses it and writes no token file."""
    port = _free_port()
    env = {**_embedded_env(tmp_path, port), "MULTICA_DAEMON_TOKEN": "chosen-token"}
    async with daemon_process(env, "server"):

        async def answering() -> bool:
            try:
                async with httpx.AsyncClient() as http:
                    auth = {"Authorization": "Bearer chosen-token"}
                    got = await http.get(f"http://127.0.0.1:{port}/api/tasks", headers=auth)
            except httpx.TransportError:
                return False
            return got.status_code == 200

        await eventually(answering, within=30, every=0.1)
        queued = await _cli(env, "submit", "hello")
    assert queued.returncode == 0, queued.stderr.decode()
    assert not (tmp_path / "state" / "server.token").exists()
