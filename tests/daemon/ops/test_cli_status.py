"""`agent-daemon status` and `check` as real commands against a running daemon's health port."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import pytest

from backends.process.identity import AgentUser
from daemon.cli.status_view import base_url, render
from daemon.logs import short_id
from daemon.ops.handles import LENGTH
from daemon.ops.health import HealthServer
from daemon.ops.health_access import view_key
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


def _squatter(sock: socket.socket, heard: list[bytes]) -> None:
    """Answer one request on `sock` with an empty health document, keeping what it heard."""
    conn, _ = sock.accept()
    with conn:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        heard.append(data)
        body = b'{"status":"running"}'
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )


async def test_status_sends_a_key_made_from_the_token_never_the_token(tmp_path: Path) -> None:
    """Whatever listens on the health address (a process squatting on it while the daemon is
    down) hears the view key, never the daemon's token; the daemon accepts that key."""
    heard: list[bytes] = []
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, _squatter, sock, heard)
            env = {**cli_env(tmp_path), "MULTICA_DAEMON_TOKEN": "the-real-token"}
            code, _, err = await run_cli("status", "--addr", f"127.0.0.1:{port}", env=env)
    assert code == 0, err
    (request,) = heard
    assert b"the-real-token" not in request
    assert f"Authorization: Bearer {view_key('the-real-token')}".encode() in request
