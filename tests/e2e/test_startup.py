"""Start-up against a server that is not there yet, or that refuses the daemon."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from tests.fakes.multica_server import multica_server
from tests.helpers import (
    ROOT,
    daemon_env,
    daemon_process,
    embedded_server,
    eventually,
    server_client,
)

pytestmark = pytest.mark.anyio


def held_port() -> socket.socket:
    """A loopback port bound but not listening: connects are refused, and no other test's
    server can take it (a port only looked up as free was taken by a concurrent test's server
    under load, and the daemon registered there)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


async def test_daemon_waits_for_an_unreachable_server_then_serves(tmp_path: Path) -> None:
    """Started before its server, the daemon keeps trying, registers once it is up, runs tasks."""
    with held_port() as holder:  # closed even when the test fails
        port = holder.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        log = tmp_path / "daemon.log"
        async with daemon_process(daemon_env(tmp_path, url), log=log) as proc:
            # One refused registration (each is the client's own retries, then the backoff) shows
            # the daemon waiting instead of exiting.
            await eventually(
                lambda: "server not reachable for registration" in log.read_text(),
                within=60,
                what="a refused registration",
            )
            assert proc.returncode is None
            holder.close()  # the server binds it at once
            async with (
                embedded_server(tmp_path / "server.db", port=port),
                server_client(url) as http,
            ):
                prompt = json.dumps({"steps": [{"result": {"output": "up"}}]})
                task_id = (await http.post("/api/tasks", json={"prompt": prompt})).json()["id"]

                async def done() -> bool:
                    return (await http.get(f"/api/tasks/{task_id}")).json()["status"] == "completed"

                await eventually(done, within=30, every=0.1)


async def test_sigterm_while_waiting_for_the_server_exits_0(tmp_path: Path) -> None:
    """A stop request during the wait for an unreachable server ends it cleanly."""
    with held_port() as holder:
        env = daemon_env(tmp_path, f"http://127.0.0.1:{holder.getsockname()[1]}")
        log = tmp_path / "daemon.log"
        async with daemon_process(env, log=log) as proc:
            # The wait has begun (signals are handled from before it) once a refusal is logged;
            # a fixed sleep lost that race on a loaded machine and the SIGTERM killed Python.
            await eventually(
                lambda: "server not reachable" in log.read_text(), within=60, every=0.1
            )
            proc.terminate()
            with anyio.fail_after(15):
                assert await proc.wait() == 0


async def run_to_exit(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`agent-daemon run` in a child process with `env`, until it exits (at most 60 s)."""
    env = {**env, "PYTHONPATH": str(ROOT)}
    return await anyio.to_thread.run_sync(
        lambda: subprocess.run(
            [sys.executable, "-m", "daemon", "run"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    )


async def test_refused_registration_exits_1_with_one_line(tmp_path: Path) -> None:
    """A server that refuses the daemon's token stops start-up with one clear line, exit 1."""
    async with embedded_server(tmp_path / "server.db", token="right-token") as url:
        env = daemon_env(tmp_path, url, MULTICA_DAEMON_TOKEN="wrong-token", LOG_LEVEL="ERROR")
        done = await run_to_exit(env)
    assert done.returncode == 1
    assert "refused the daemon's registration" in done.stderr
    assert "Traceback" not in done.stderr
    assert "wrong-token" not in done.stderr


async def test_start_up_fails_in_one_line_when_no_workspace_registers(tmp_path: Path) -> None:
    """A Multica server refusing every workspace's register is fatal: one closing line, exit 1
    (one refused workspace among others is only skipped)."""
    async with multica_server() as fake:
        fake.refuse_register(fake.workspace_id)
        done = await run_to_exit(daemon_env(tmp_path, fake.url, LOG_LEVEL="ERROR"))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "agent-daemon: the server refused the daemon's registration: "
        "register: workspace not found (HTTP 404)"
    )


@contextmanager
def unusable_state_dir(tmp_path: Path, kind: str) -> Iterator[Path]:
    """A state directory that is a regular file, or a read-only file system (EROFS, which
    binds root too; mounting it needs root)."""
    state = tmp_path / "state"
    if kind == "file":
        state.write_text("not a directory\n")
        yield state
        return
    if os.geteuid() != 0:
        pytest.skip("a read-only file system needs root to mount a tmpfs")
    state.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(state)], check=True)
    try:
        yield state
    finally:
        subprocess.run(["umount", "--lazy", str(state)], check=False)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("file", "it is not a directory"), ("read-only", "Read-only file system")],
)
async def test_an_unusable_state_directory_is_one_line_and_exit_1(
    tmp_path: Path, kind: str, reason: str
) -> None:
    """`agent-daemon run` on a state directory it cannot write says so in one line naming the
    directory, without a traceback, and exits 1."""
    with unusable_state_dir(tmp_path, kind) as state:
        env = daemon_env(tmp_path, "http://127.0.0.1:9", MULTICA_DAEMON_STATE_DIR=str(state))
        done = await run_to_exit(env)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"agent-daemon: cannot use the state directory {state}: {reason}"
    ]
