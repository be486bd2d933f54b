"""The health port: its routes over real HTTP, liveness of the event loop, the lock, sd_notify."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest

import daemon
from daemon.cli.tasks_api import TasksApi
from daemon.errors import AlreadyRunningError
from daemon.ops.health import HealthServer
from daemon.ops.metrics import Metrics
from daemon.ops.sdnotify import Notifier
from daemon.protocol.release import cli_version
from daemon.snapshot import DaemonSnapshot
from tests.daemon_child import daemon_child, run_cli
from tests.helpers import (
    daemon_env,
    embedded_server,
    eventually,
    running_daemon,
    server_client,
    serving_daemon,
)

pytestmark = pytest.mark.anyio

TOKEN = "daemon-token-that-must-never-show"
SECRET_WORDS = "prompt-words-that-must-never-show"


@asynccontextmanager
async def health_port(**options: Any) -> AsyncIterator[tuple[HealthServer, str]]:
    """A HealthServer with no worker attached, on a free loopback port."""
    server = HealthServer("127.0.0.1:0", Metrics(), **options)
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        yield server, f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


async def get(url: str, token: str = "") -> httpx.Response:
    """GET `url`; with the daemon's `token`, as the authenticated view (full ids)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=5, headers=headers) as http:
        return await http.get(url)


async def tool_shown(health_url: str) -> bool:
    """True once /health shows a task with a tool call in flight."""
    tasks = (await get(f"{health_url}/health")).json()["tasks"]
    return any(t["tools_in_flight"] for t in tasks)


def tool_script(seconds: float) -> dict[str, Any]:
    """Say something, then sit in a `Bash` tool call for `seconds`, then finish."""
    return {
        "steps": [
            {"text": "starting " + SECRET_WORDS},
            {
                "tool": {
                    "name": "Bash",
                    "call_id": "c1",
                    "input": {"command": "make"},
                    "seconds": seconds,
                }
            },
            {"result": {"output": "done"}},
        ]
    }


async def test_health_document_describes_the_daemon_and_its_running_task(tmp_path: Path) -> None:
    """/health has the Multica fields plus each running task's pid, idle time, tools and windows."""
    async with serving_daemon(
        tmp_path,
        health=True,
        MULTICA_DAEMON_TOKEN=TOKEN,
        MULTICA_AGENT_TOOL_WATCHDOG="1h",
        MULTICA_DAEMON_SHUTDOWN_GRACE="100ms",
    ) as d:
        task_id = await d.submit(tool_script(30))
        await eventually(lambda: tool_shown(d.health_url))
        response = await get(f"{d.health_url}/health", token=d.settings.token)
    doc = response.json()
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert doc["status"] == doc["stage"] == "running"
    assert doc["pid"] == os.getpid()
    assert doc["os"] == "linux"
    assert doc["daemon_id"] == d.worker.daemon_id
    assert doc["device_name"] == d.settings.device_name
    assert doc["server_url"] == d.settings.server_url
    # The version the server sees (`multica daemon status` prints it); this daemon's own apart.
    assert doc["cli_version"] == cli_version() and doc["version"] == daemon.__version__
    assert isinstance(doc["uptime"], str) and doc["uptime_seconds"] >= 0
    assert doc["registered"] is True
    assert (doc["active_task_count"], doc["running_task_count"]) == (1, 1)
    assert "scripted" in doc["agents"]
    assert doc["agent_versions"]["scripted"] == d.worker.backends["scripted"][1]
    runtimes = [r.id for r in d.worker.registration.runtimes]
    assert doc["workspaces"] == [{**w, "runtimes": runtimes} for w in d.worker.workspaces]
    assert doc["workspaces"]
    assert (doc["server_circuit"], doc["outbox_depth"]) == ("closed", 0)
    (task,) = doc["tasks"]
    assert task["id"] == task_id and task["backend"] == "scripted"
    assert isinstance(task["pid"], int) and task["pid"] != os.getpid()
    assert task["started_at"].endswith("Z")
    assert 0 <= task["idle_seconds"] < 30
    assert [(t["name"], t["call_id"]) for t in task["tools_in_flight"]] == [("Bash", "c1")]
    assert (task["watchdog_scope"], task["threshold_seconds"]) == ("tool", 3600)
    assert 3600 - 30 < task["watchdog_fires_in_seconds"] <= 3600


async def test_health_shows_the_first_output_window_before_the_first_message(
    tmp_path: Path,
) -> None:
    """An agent that has said nothing yet is under the first-output budget, not the idle one."""
    script = {"steps": [{"sleep": 30}, {"result": {"output": "late"}}]}
    async with serving_daemon(
        tmp_path,
        health=True,
        MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="10m",
        MULTICA_DAEMON_SHUTDOWN_GRACE="100ms",
    ) as d:
        await d.submit(script)

        async def agent_started() -> bool:
            tasks = (await get(f"{d.health_url}/health")).json()["tasks"]
            return bool(tasks) and tasks[0]["pid"] is not None and tasks[0]["threshold_seconds"] > 0

        await eventually(agent_started)
        (task,) = (await get(f"{d.health_url}/health")).json()["tasks"]
    assert (task["watchdog_scope"], task["threshold_seconds"]) == ("first_output", 600)
    assert 600 - 30 < task["watchdog_fires_in_seconds"] <= 600


async def test_health_document_never_shows_the_token_or_the_prompt(tmp_path: Path) -> None:
    """Neither the daemon's token nor any words of the prompt appear on the health port."""
    async with serving_daemon(
        tmp_path, health=True, MULTICA_DAEMON_TOKEN=TOKEN, MULTICA_DAEMON_SHUTDOWN_GRACE="100ms"
    ) as d:
        await d.submit(tool_script(30))
        await eventually(lambda: tool_shown(d.health_url))
        bodies = [
            (await get(f"{d.health_url}{path}")).text for path in ("/health", "/metrics", "/readyz")
        ]
    assert d.settings.token == TOKEN
    for body in bodies:
        assert TOKEN not in body
        assert SECRET_WORDS not in body
    assert '"tasks":[{' in bodies[0]


async def test_health_port_serves_starting_before_the_worker_exists() -> None:
    """Before a worker is attached: /health says starting, /readyz 503, /healthz 200."""
    async with health_port() as (_, url):
        health, ready, live = [await get(f"{url}{p}") for p in ("/health", "/readyz", "/healthz")]
    assert health.json()["status"] == "starting"
    assert ready.status_code == 503 and ready.json()["reason"] == "not registered yet"
    assert live.status_code == 200


async def test_healthz_is_503_while_the_event_loop_is_blocked_and_200_after() -> None:
    """A loop stuck for 3 s (threshold 1 s) turns /healthz 503; once it runs again, 200."""
    async with health_port(stale_after=1.0, tick=0.1) as (_, url):
        before = await get(f"{url}/healthz")
        during: list[httpx.Response] = []

        def ask_while_blocked() -> None:
            time.sleep(1.8)
            during.append(httpx.get(f"{url}/healthz", timeout=5))

        asker = threading.Thread(target=ask_while_blocked)
        asker.start()
        time.sleep(3.0)  # noqa: ASYNC251 - blocks the event loop on purpose: no tick can run
        asker.join(timeout=10)
        await anyio.sleep(0.3)
        after = await get(f"{url}/healthz")
    assert before.status_code == 200
    assert [r.status_code for r in during] == [503]
    assert "event loop stalled" in during[0].json()["reason"]
    assert after.status_code == 200


async def test_readyz_is_200_when_registered_and_503_while_the_circuit_is_open(
    tmp_path: Path,
) -> None:
    """Registered: ready; three failed server calls open the circuit: not ready."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        # No heartbeat for the length of the test: a successful one would close the circuit.
        running_daemon(tmp_path, url, MULTICA_DAEMON_HEARTBEAT_INTERVAL="1000h") as d,
        health_port() as (health, health_url),
    ):
        health.attach(d.worker.snapshot, d.worker.request_stop)
        ready = await get(f"{health_url}/readyz")
        for _ in range(3):
            d.worker.circuit.record_failure()
        health.tick()
        # Blocking on purpose: nothing on the loop may run between the tick and the answer.
        not_ready = httpx.get(f"{health_url}/readyz", timeout=5)  # noqa: ASYNC210
    assert ready.status_code == 200 and ready.json()["daemon_id"] == d.worker.daemon_id
    assert not_ready.status_code == 503
    assert "server circuit open" in not_ready.json()["reason"]


async def test_post_shutdown_stops_the_worker_gracefully(tmp_path: Path) -> None:
    """POST /shutdown asks the worker to stop, like SIGTERM; /health then says stopping in
    `stage`, and `running` in Multica's `status` while the daemon lives."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(tmp_path, url, health=True) as d,
        httpx.AsyncClient(base_url=d.health_url, timeout=5) as http,
    ):
        answer = await http.post("/shutdown")
        status_now = d.worker.status
        doc = (await http.get("/health")).json()
        wrong_method = await http.get("/shutdown")
    assert answer.status_code == 202 and answer.json() == {"status": "stopping"}
    assert status_now == "stopping"
    assert (doc["status"], doc["stage"]) == ("running", "stopping")
    assert wrong_method.status_code == 405


def broken_snapshot() -> DaemonSnapshot:
    """A snapshot that cannot be built: stands in for a bug in the health document."""
    raise RuntimeError("state unreadable")


async def test_a_failing_health_document_never_stops_the_port(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The port keeps ticking and serves the last good document, logging the error once."""
    async with health_port(tick=0.05) as (server, url):
        server.attach(broken_snapshot, lambda: None)
        await anyio.sleep(0.3)
        live, health = [await get(f"{url}{p}") for p in ("/healthz", "/health")]
    assert live.status_code == 200
    assert health.json()["status"] == "starting"
    assert health.json()["snapshot_age_seconds"] >= 0.25
    failures = [r for r in caplog.records if "health document failed" in r.getMessage()]
    assert len(failures) == 1


def test_shutdown_is_refused_from_a_non_loopback_peer() -> None:
    """On a pod-wide listen address, only local clients may stop the daemon."""
    server = HealthServer("127.0.0.1:0", Metrics())
    assert server.route("POST", "/shutdown", "10.1.2.3").status == 403
    assert server.route("POST", "/shutdown", "::ffff:10.1.2.3").status == 403


async def test_unknown_path_is_404_with_the_routes() -> None:
    """A wrong path answers 404 and lists what the port serves."""
    async with health_port() as (_, url):
        answer = await get(f"{url}/nope")
    assert answer.status_code == 404
    assert "GET /healthz" in answer.json()["routes"]


async def test_a_second_health_server_on_the_same_address_is_refused() -> None:
    """Binding a taken health address raises AlreadyRunningError naming the address."""
    async with health_port() as (_, url):
        port = url.rsplit(":", 1)[1]
        second = HealthServer(f"127.0.0.1:{port}", Metrics())
        with pytest.raises(AlreadyRunningError, match=f"already running on 127.0.0.1:{port}"):
            await second.serve()
        still = await get(f"{url}/healthz")
    assert still.status_code == 200


async def test_second_daemon_process_exits_1_and_the_first_keeps_working(tmp_path: Path) -> None:
    """Two `agent-daemon run` on one health address: the second exits 1 with the reason."""
    async with embedded_server(tmp_path / "server.db") as url:
        first_env = daemon_env(tmp_path / "first", url)
        async with daemon_child(first_env) as first:
            port = first.health_url.rsplit(":", 1)[1]
            second_env = daemon_env(
                tmp_path / "second", url, MULTICA_DAEMON_HEALTH_ADDR=f"127.0.0.1:{port}"
            )
            second_code, _, second_err = await run_cli("run", env=second_env)
            live = await get(f"{first.health_url}/healthz")
            async with server_client(url) as user:
                api = TasksApi(user)
                task_id = (await api.create_task("hello", backend="scripted"))["id"]
                await eventually(lambda: _status_is(api, task_id, "completed"), within=30)
            code = await first.stop()
    errors = second_err.strip().splitlines()
    assert second_code == 1
    assert errors == [
        f"agent-daemon: another daemon is already running on 127.0.0.1:{port} "
        "(its health port is taken; stop it, or set MULTICA_DAEMON_HEALTH_ADDR to run a second one)"
    ]
    assert live.status_code == 200
    assert code == 0


async def _status_is(api: TasksApi, task_id: str, status: str) -> bool:
    return bool((await api.get_task(task_id))["status"] == status)


@contextmanager
def notify_socket() -> Iterator[tuple[socket.socket, str]]:
    """A unix datagram socket standing in for systemd's notify socket."""
    # A short directory: a unix socket path has at most 108 bytes; tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="sdn") as directory:
        path = str(Path(directory) / "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        try:
            yield sock, path
        finally:
            sock.close()


def drain(sock: socket.socket) -> list[str]:
    """Every datagram waiting on `sock`, without blocking."""
    sock.setblocking(False)
    found = []
    while True:
        try:
            found.append(sock.recv(4096).decode())
        except BlockingIOError:
            return found


async def test_systemd_gets_ready_watchdog_and_stopping_from_a_real_daemon(tmp_path: Path) -> None:
    """`agent-daemon run` under a notify socket: READY=1, WATCHDOG=1s, STOPPING=1 on SIGTERM."""
    with notify_socket() as (sock, path):
        async with embedded_server(tmp_path / "server.db") as url:
            env = daemon_env(tmp_path, url, NOTIFY_SOCKET=path, WATCHDOG_USEC="1000000")
            async with daemon_child(env) as child:
                await eventually(lambda: "started:" in child.log)
                await anyio.sleep(1.6)  # at least two watchdog intervals of 0.5 s
                running = drain(sock)
                code = await child.stop()
        stopped = drain(sock)
    fields = [line for datagram in running for line in datagram.splitlines()]
    assert fields.count("READY=1") == 1
    assert fields.count("WATCHDOG=1") >= 2
    # The status line goes with READY=1 and again only when it changes.
    assert fields.count("STATUS=running: 0/20 tasks, server circuit closed, outbox 0") == 1
    assert "STOPPING=1" not in fields
    assert any("STOPPING=1" in d.splitlines() for d in stopped)
    assert code == 0


async def test_watchdog_pings_pause_while_the_event_loop_is_blocked() -> None:
    """WATCHDOG=1 comes from the loop's tick: none is sent while the loop is stuck."""
    with notify_socket() as (sock, path):
        notifier = Notifier(path, watchdog_usec=100_000)
        async with health_port(notifier=notifier, tick=0.05):
            await anyio.sleep(0.3)
            before = drain(sock)
            time.sleep(1.0)  # noqa: ASYNC251 - blocks the event loop on purpose
            during = drain(sock)
            await anyio.sleep(0.3)
            after = drain(sock)
    assert "WATCHDOG=1" in before
    assert during == []
    assert "WATCHDOG=1" in after
