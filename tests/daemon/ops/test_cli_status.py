"""`agent-daemon status` and `check` as real commands against a running daemon's health port."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from anyio.abc import SocketStream

from backends.process.identity import AgentUser
from daemon.cli.status_view import base_url, render
from daemon.logs import short_id
from daemon.ops.handles import LENGTH
from daemon.ops.health import HealthServer
from daemon.ops.metrics import Metrics
from tests.daemon_child import run_cli
from tests.helpers import RunningDaemon, embedded_server, eventually, running_daemon, serving_daemon

pytestmark = pytest.mark.anyio

SCRIPT = {
    "steps": [
        {"text": "running the tests"},
        {"tool": {"name": "Bash", "call_id": "c7", "input": {"command": "make"}, "seconds": 60}},
        {"result": {"output": "done"}},
    ]
}


ROOT_WARNING = (
    "agent-daemon: warning: agents run as root and can read the daemon's token; "
    "set MULTICA_AGENT_USER\n"
)


def cli_env(home: Path) -> dict[str, str]:
    """A minimal environment for the CLI; the address always comes from --addr."""
    return {"HOME": str(home), "PATH": os.environ.get("PATH", "")}


def own_env(home: Path, d: RunningDaemon) -> dict[str, str]:
    """The CLI's environment holding the daemon's token, as an operator's shell has it."""
    return {**cli_env(home), "MULTICA_DAEMON_TOKEN": d.settings.token}


def addr(health_url: str) -> str:
    return health_url.removeprefix("http://")


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def with_tool_in_flight(d: RunningDaemon) -> str:
    """Submit SCRIPT and wait until /health shows its tool call; returns the task id."""
    task_id = await d.submit(SCRIPT)

    async def shown() -> bool:
        async with httpx.AsyncClient(timeout=5) as http:
            tasks = (await http.get(f"{d.health_url}/health")).json()["tasks"]
        return any(t["tools_in_flight"] for t in tasks)

    await eventually(shown)
    return task_id


async def test_status_prints_the_daemon_and_a_table_of_running_tasks(tmp_path: Path) -> None:
    """The table names the daemon, and per task its backend, tool in flight and watchdog."""
    async with serving_daemon(
        tmp_path,
        health=True,
        MULTICA_AGENT_TOOL_WATCHDOG="1h",
        MULTICA_DAEMON_SHUTDOWN_GRACE="100ms",
    ) as d:
        task_id = await with_tool_in_flight(d)
        code, out, err = await run_cli(
            "status", "--addr", addr(d.health_url), env=own_env(tmp_path, d)
        )
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[0].startswith("agent-daemon ") and " running " in lines[0]
    assert d.worker.daemon_id in out
    assert f"server     {d.settings.server_url}  circuit closed  outbox 0" in lines
    assert "tasks      1 active, 1 running, 20 slots" in lines
    as_root = "  (as root)" if os.geteuid() == 0 else ""
    assert f"agents     scripted {d.worker.backends['scripted'][1]}{as_root}" in lines
    (workspace,) = d.worker.workspaces
    assert f"workspaces {workspace['name'] or workspace['id']} (1 runtimes)" in lines
    header = next(line for line in lines if line.startswith("TASK"))
    assert header.split() == [
        "TASK", "BACKEND", "PID", "STARTED", "IDLE", "TOOLS", "IN", "FLIGHT", "WATCHDOG"
    ]  # fmt: skip
    (row,) = [line for line in lines if line.startswith(short_id(task_id))]
    assert " scripted " in row
    assert "Bash c7 (" in row
    assert "tool 1h0m0s, fires in " in row


async def test_status_json_prints_the_health_document(tmp_path: Path) -> None:
    """`status --json` prints the /health document itself."""
    async with serving_daemon(tmp_path, health=True, MULTICA_DAEMON_SHUTDOWN_GRACE="100ms") as d:
        task_id = await with_tool_in_flight(d)
        code, out, _ = await run_cli(
            "status", "--json", "--addr", addr(d.health_url), env=own_env(tmp_path, d)
        )
    doc = json.loads(out)
    assert code == 0
    assert doc["daemon_id"] == d.worker.daemon_id
    assert [t["id"] for t in doc["tasks"]] == [task_id]
    assert doc["tasks"][0]["tools_in_flight"][0]["call_id"] == "c7"


async def test_status_without_the_token_names_tasks_by_handle(tmp_path: Path) -> None:
    """A user without the daemon's token sees each task by its handle, never by its id."""
    async with serving_daemon(tmp_path, health=True, MULTICA_DAEMON_SHUTDOWN_GRACE="100ms") as d:
        task_id = await with_tool_in_flight(d)
        code, out, _ = await run_cli("status", "--addr", addr(d.health_url), env=cli_env(tmp_path))
    assert code == 0
    assert task_id[:8] not in out
    row = next(line for line in out.splitlines() if "Bash c7 (" in line)
    assert len(row.split()[0]) == LENGTH and row.split()[0].isalpha()


async def test_status_names_the_multica_profile(tmp_path: Path) -> None:
    """A daemon under MULTICA_PROFILE says so in /health and on the status daemon line."""
    async with serving_daemon(tmp_path, health=True, MULTICA_PROFILE="work") as d:
        code, out, _ = await run_cli("status", "--addr", addr(d.health_url), env=cli_env(tmp_path))
    assert code == 0
    assert f"daemon     {d.worker.daemon_id} on {d.settings.device_name}  profile work" in out


async def test_status_names_the_containment_a_real_daemon_runs_its_agents_in(
    tmp_path: Path,
) -> None:
    """/health and `status` say what makes each run a unit here (as root on Linux: a pid
    namespace, and cgroups where a tree is writable)."""
    async with serving_daemon(tmp_path, health=True) as d:
        code, out, _ = await run_cli("status", "--addr", addr(d.health_url), env=cli_env(tmp_path))
        named = d.worker.snapshot().containment
    assert code == 0
    assert named.startswith("pid namespace")
    assert f"contained  {named}" in out.splitlines()


def test_status_says_which_agent_user_is_held_back_and_why() -> None:
    """A uid whose processes outlived its sweep is shown with the reason no task gets it."""
    doc = {"agent_users_held_back": ["agent2 (uid 2001): 1 process(es) outlived the sweep"]}
    assert "held back  agent2 (uid 2001): 1 process(es) outlived the sweep" in render(doc)


def test_status_still_reads_the_older_agent_shape() -> None:
    """A daemon from before Go's shapes listed agents as `{name, version}`: still rendered."""
    old = {"agents": [{"name": "claude", "version": "2.1"}], "workspaces": [{"id": "w1"}]}
    lines = render(old).splitlines()
    assert "agents     claude 2.1" in lines
    assert "workspaces w1 (0 runtimes)" in lines


def test_status_marks_an_agent_no_test_drives() -> None:
    """An ACP agent offered from its entry alone is shown as untested beside its version."""
    doc = {"agents": ["claude", "kimi"], "agent_versions": {"claude": "2.1", "kimi": "1.2.0"}}
    assert "agents     claude 2.1, kimi 1.2.0 (untested)" in render(doc).splitlines()


async def test_check_exits_0_when_live_and_ready(tmp_path: Path) -> None:
    """A registered daemon with a closed circuit passes `check`."""
    async with serving_daemon(tmp_path, health=True) as d:
        code, out, err = await run_cli("check", "--addr", addr(d.health_url), env=cli_env(tmp_path))
    assert (code, err) == (0, ROOT_WARNING if os.geteuid() == 0 else "")
    assert out == f"ok: live and ready (daemon {short_id(d.worker.daemon_id)} on {d.health_url})\n"


@pytest.mark.root
async def test_check_warns_when_agents_run_as_root(tmp_path: Path, agent_user: AgentUser) -> None:
    """A root daemon without an agent user passes `check` with a warning line saying its agents
    run as root; with MULTICA_AGENT_USER it passes silently."""
    async with serving_daemon(tmp_path, health=True) as d:
        as_root = await run_cli("check", "--addr", addr(d.health_url), env=cli_env(tmp_path))
    with_user = tmp_path / "with-user"
    with_user.mkdir()
    async with serving_daemon(with_user, health=True, MULTICA_AGENT_USER=agent_user.name) as d:
        as_user = await run_cli("check", "--addr", addr(d.health_url), env=cli_env(with_user))
    assert (as_root[0], as_root[2]) == (0, ROOT_WARNING)
    assert (as_user[0], as_user[2]) == (0, "")


async def test_check_exits_1_with_the_reason_while_the_circuit_is_open(tmp_path: Path) -> None:
    """An open server circuit fails `check` with one line naming it."""
    claims = {"endpoint": "claim", "outcome": "ok"}
    async with (
        embedded_server(tmp_path / "server.db") as url,
        # One claim at start, then no server call during the test: an answer to any of them
        # would close the circuit again.
        running_daemon(
            tmp_path,
            url,
            health=True,
            MULTICA_DAEMON_HEARTBEAT_INTERVAL="1000h",
            MULTICA_DAEMON_POLL_INTERVAL="1000h",
        ) as d,
    ):
        samples = d.metrics.registry.get_sample_value
        await eventually(lambda: bool(samples("agent_daemon_server_requests_total", claims)))
        for _ in range(3):
            d.worker.circuit.record_failure()

        async def not_ready() -> bool:
            async with httpx.AsyncClient(timeout=5) as http:
                return (await http.get(f"{d.health_url}/readyz")).status_code == 503

        await eventually(not_ready)
        code, out, err = await run_cli("check", "--addr", addr(d.health_url), env=cli_env(tmp_path))
    assert (code, out) == (1, "")
    assert err == "agent-daemon: not ready: server circuit open: the server keeps failing\n"


async def test_check_exits_1_before_registration() -> None:
    """A daemon still starting up is live but not ready."""
    server = HealthServer("127.0.0.1:0", Metrics())
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        code, _, err = await run_cli("check", "--addr", f"127.0.0.1:{port}", env=cli_env(Path("/")))
        tg.cancel_scope.cancel()
    assert code == 1
    assert err == "agent-daemon: not ready: not registered yet\n"


@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["check"]])
async def test_nothing_listening_is_one_line_and_exit_1(tmp_path: Path, command: list[str]) -> None:
    """With no daemon on the address, each command says so in one line and exits 1."""
    port = free_port()
    code, out, err = await run_cli(*command, "--addr", f"127.0.0.1:{port}", env=cli_env(tmp_path))
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(
        f"agent-daemon: nothing answers on 127.0.0.1:{port} (is the daemon running?)"
    )


def test_wildcard_listen_address_is_probed_on_loopback() -> None:
    """A container's 0.0.0.0:PORT (or [::]:PORT) setting is probed through loopback."""
    assert base_url("0.0.0.0:19514") == "http://127.0.0.1:19514"
    assert base_url("[::]:19514") == "http://[::1]:19514"
    assert base_url("10.0.0.7:19514") == "http://10.0.0.7:19514"


@pytest.mark.parametrize("bad", ["127.0.0.1:0", "nonsense", "host:port"])
async def test_unusable_address_is_one_line_and_exit_1(tmp_path: Path, bad: str) -> None:
    """An address the CLI cannot probe is refused in one line naming it."""
    code, out, err = await run_cli("check", "--addr", bad, env=cli_env(tmp_path))
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1 and repr(bad) in err


@asynccontextmanager
async def recording_relay(upstream: str) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A TCP relay on loopback in front of `upstream` (`host:port`), of this test's own user
    (so `status` trusts its port): yields its address and, per connection, the bytes the
    client sent."""
    host, port = upstream.rsplit(":", 1)
    heard: list[bytes] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")

    async def pump(source: SocketStream, sink: SocketStream, record: bytearray | None) -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
            async for chunk in source:
                if record is not None:
                    record.extend(chunk)
                await sink.send(chunk)
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await sink.send_eof()

    async def relay(client: SocketStream) -> None:
        record = bytearray()
        async with (
            client,
            await anyio.connect_tcp(host, int(port)) as server,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(pump, client, server, record)
            tg.start_soon(pump, server, client, None)
        heard.append(bytes(record))

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, relay)
        yield f"127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}", heard
        tg.cancel_scope.cancel()


def _requests(stream: bytes) -> list[bytes]:
    """The bodiless requests in what one client sent, each as its head."""
    return [head + b"\r\n\r\n" for head in stream.split(b"\r\n\r\n") if head]


async def _replayed(health_url: str, request: bytes) -> dict[str, Any]:
    """The JSON `health_url`'s port answers to `request`'s bytes, sent as they were heard."""
    url = httpx.URL(health_url)
    async with await anyio.connect_tcp(str(url.host), int(url.port or 80)) as stream:
        request = request.replace(b"keep-alive", b"close")
        await stream.send(request)
        answer = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
            async for chunk in stream:
                answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    doc: dict[str, Any] = json.loads(body)
    return doc


async def test_a_proof_overheard_and_replayed_shows_no_ids(tmp_path: Path) -> None:
    """Whatever relays `status`'s requests hears no token and nothing it can use again: the
    operator sees full ids, the same bytes replayed to the daemon get handles only."""
    async with serving_daemon(tmp_path, health=True) as d:
        (workspace,) = d.worker.workspaces
        async with recording_relay(addr(d.health_url)) as (relayed, heard):
            code, out, err = await run_cli(
                "status", "--json", "--addr", relayed, env=own_env(tmp_path, d)
            )
        assert code == 0, err
        assert [w["id"] for w in json.loads(out)["workspaces"]] == [workspace["id"]]
        requests = [r for stream in heard for r in _requests(stream)]
        assert requests and not any(d.settings.token.encode() in r for r in requests)
        for request in requests:
            if request.startswith(b"GET /health "):
                replayed = await _replayed(d.health_url, request)
                assert [w["id"] for w in replayed["workspaces"]] != [workspace["id"]]
                assert all(len(w["id"]) == LENGTH for w in replayed["workspaces"])


_NEIGHBOUR = """
import socket, sys, threading
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(8)
print(sock.getsockname()[1], flush=True)
heard = []
def serve():
    while True:
        conn, _ = sock.accept()
        conn.settimeout(2)
        data = b""
        try:
            while b"\\r\\n\\r\\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        heard.append(data)
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\n{}")
        conn.close()
threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
print(b"".join(heard).hex(), flush=True)
"""


@pytest.mark.root
async def test_status_sends_nothing_to_a_port_another_user_holds(
    tmp_path: Path, agent_user: AgentUser
) -> None:
    """A neighbour (another user) listening on the address `status` is given: `status` sends
    it nothing, not even a connect, and says who holds the port; replaying what it heard to
    the real daemon shows handles only."""
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    async with await anyio.open_process(
        [python, "-c", _NEIGHBOUR],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd="/",
        **agent_user.spawn_options(),
    ) as neighbour:
        assert neighbour.stdin is not None and neighbour.stdout is not None
        port = int(await _line(neighbour.stdout))
        async with serving_daemon(tmp_path, health=True) as d:
            (workspace,) = d.worker.workspaces
            code, _, err = await run_cli(
                "status", "--addr", f"127.0.0.1:{port}", env=own_env(tmp_path, d)
            )
            await neighbour.stdin.aclose()
            heard = bytes.fromhex(await _line(neighbour.stdout))
            replayed = await _replayed(d.health_url, _as_health_request(heard))
    assert [w["id"] for w in replayed["workspaces"]] != [workspace["id"]]
    assert heard == b""
    assert (code, err) == (
        1,
        f"agent-daemon: 127.0.0.1:{port} is held by uid {agent_user.uid}, not the daemon's "
        "user (uid 0): not asking it\n",
    )


async def _line(stream: anyio.abc.ByteReceiveStream) -> str:
    """One line from the neighbour's stdout (a safety net of 30 s)."""
    data = b""
    with anyio.fail_after(30):
        while not data.endswith(b"\n"):
            data += await stream.receive()
    return data.decode().strip()


def _as_health_request(heard: bytes) -> bytes:
    """What a neighbour heard, as a `GET /health` to replay: its `Authorization` kept."""
    auth = [line for line in heard.split(b"\r\n") if line.lower().startswith(b"authorization:")]
    return b"\r\n".join([b"GET /health HTTP/1.1", b"Host: 127.0.0.1", *auth[-1:], b"", b""])
