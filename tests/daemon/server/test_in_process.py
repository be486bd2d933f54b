"""The embedded server answering its own daemon in-process: through the app, not a socket."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from daemon.protocol.http_client import make_http_client
from daemon.server.app import create_app
from daemon.server.in_process import InProcess
from daemon.server.store import Store
from tests.helpers import ROOT, TOKEN, daemon_env, daemon_process

pytestmark = pytest.mark.anyio


async def test_requests_pass_the_guard_and_answer_as_over_a_socket(db_path: Path) -> None:
    """The daemon's client, on the transport, is let in by Host and token; a wrong token is
    still refused, and a failing route is a 500 answer, not an exception in the daemon."""
    store = Store(db_path)
    embedded = InProcess(app=create_app(store, TOKEN))
    url = "http://127.0.0.1:8080"  # the address the daemon would use; nothing listens there
    transport = embedded.transport()
    async with make_http_client(url, TOKEN, "test", transport=transport) as http:
        assert (await http.get("/api/daemon/workspaces")).status_code == 200
        store.close()  # every store call now raises
        failed = await http.get("/api/tasks")
    async with make_http_client(url, "wrong", "test", transport=transport) as http:
        refused = await http.get("/api/daemon/workspaces")
    assert failed.status_code == 500
    assert failed.json() == {"error": "internal server error"}
    assert refused.status_code == 401


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _connections_to(port: int) -> int:
    """Established TCP connections on this machine whose far end is 127.0.0.1:`port`."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                count += 1
    return count


async def test_agent_daemon_run_talks_to_its_embedded_server_without_a_socket(
    tmp_path: Path,
) -> None:
    """`agent-daemon run` registers, heartbeats, claims and reports in-process: while it
    runs, nothing holds a connection to the embedded server's port."""
    port = _free_port()
    env = daemon_env(tmp_path, "", MULTICA_EMBEDDED_LISTEN=f"127.0.0.1:{port}")
    del env["MULTICA_SERVER_URL"]
    prompt = json.dumps({"steps": [{"result": {"output": "in-process ok"}}]})
    submit = [sys.executable, "-m", "daemon", "submit", "--backend", "scripted", "--wait", prompt]
    async with daemon_process(env, "run") as daemon:
        with anyio.fail_after(60):
            while True:  # until the daemon has registered, then the submission is claimed
                done = await anyio.run_process(
                    submit,
                    env={**env, "PYTHONPATH": str(ROOT)},
                    check=False,
                    stderr=subprocess.PIPE,
                )
                if done.returncode == 0:
                    break
                await anyio.sleep(0.2)
        assert b"in-process ok" in done.stdout
        # Heartbeats every second: a socket client would keep its pooled connection open.
        await anyio.sleep(2)
        assert daemon.returncode is None
        assert _connections_to(port) == 0
