"""Shared async helpers: a real embedded server on loopback and a real daemon in-process."""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import daemon
from backends.base import Backend
from daemon.cli.discovery import available, candidates, detect
from daemon.cli.tasks_api import TasksApi
from daemon.config import Settings
from daemon.ops.health import HealthServer
from daemon.ops.metrics import Metrics
from daemon.protocol import control_rpc
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.client import ServerClient, make_http_client
from daemon.protocol.models import TERMINAL_STATUSES
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.wire import DAEMON_ID_HEADER
from daemon.server.in_process import InProcess
from daemon.server.serve import running_server
from daemon.services import PREPARE_LEASE_EVERY, AgentReach
from daemon.shutdown import ShutdownBudget
from daemon.testing import ROOT_AGENTS_ACCEPTED, fast_env, wait_for
from daemon.workdirs.checkout import PATH as CHECKOUT_PATH
from daemon.workdirs.checkout import CheckoutRoute
from daemon.worker import claims
from daemon.worker.cli_watch import Finder
from daemon.worker.worker import OUTBOX_INTERVAL, Worker, WorkerOptions

ROOT = Path(__file__).resolve().parent.parent
FINAL = frozenset(TERMINAL_STATUSES)


async def eventually(
    predicate: Callable[[], bool | Awaitable[bool]],
    within: float = 10.0,
    every: float = 0.02,
    *,
    what: str = "",
) -> None:
    """Wait until `predicate()` (sync or async) holds; fail the test after `within`, naming
    `what` (default: the predicate's name) as the event that never came."""
    named = what or getattr(predicate, "__qualname__", "") or repr(predicate)
    await wait_for(predicate, what=named, within=within, every=every)


TOKEN = "test-server-token"
"""The bearer token of the tests' embedded servers; `daemon_env` gives it to every daemon."""


def embedded_server(
    db_path: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str = TOKEN,
    in_process: InProcess | None = None,
) -> AbstractAsyncContextManager[str]:
    """The reference server on 127.0.0.1 with a free port (and `TOKEN`); yields its base URL.

    With `in_process`, a daemon in this process can subscribe to its hub and use its app."""
    return running_server(db_path, host, port, token, in_process)


def server_client(
    url: str, token: str = TOKEN, *, daemon_id: str = "", **options: Any
) -> httpx.AsyncClient:
    """An HTTP client of the embedded server at `url` that sends its bearer token, and with
    `daemon_id` names itself as that daemon on every request, as the daemon does."""
    headers = {"Authorization": f"Bearer {token}"}
    if daemon_id:
        headers[DAEMON_ID_HEADER] = daemon_id
    return httpx.AsyncClient(base_url=url, headers=headers, **options)


NO_PID_NAMESPACE = {"MULTICA_AGENT_PID_NAMESPACE": "0"}
"""For the tests of what stands where the kernel gives no pid namespace (an unprivileged
container): the /proc walk that finds a run's tree, the subreaper's orphans, the daemon's own
/proc entries shut to its agents. In a namespace of its own an agent sees none of those."""


def daemon_env(home: Path, server_url: str, **overrides: str) -> dict[str, str]:
    """A daemon environment with fast test-friendly defaults, rooted in `home`."""
    env = {"PATH": os.environ.get("PATH", ""), **fast_env(home, server_url, TOKEN)}
    env.update(overrides)
    return env


@dataclass
class RunningDaemon:
    """A worker running in this process, plus the server API to drive it."""

    worker: Worker
    api: TasksApi
    metrics: Metrics
    settings: Settings
    health_url: str = ""
    """`http://127.0.0.1:PORT` of the health port when started with `health=True`."""

    async def submit(
        self, prompt: str | dict[str, Any], backend: str = "scripted", prior_session_id: str = ""
    ) -> str:
        """Queue a task (a dict prompt is a scripted-backend script); return its id."""
        text = prompt if isinstance(prompt, str) else json.dumps(prompt)
        task = await self.api.create_task(text, backend=backend, prior_session_id=prior_session_id)
        return str(task["id"])

    async def cancel(self, task_id: str, within: float = 10.0) -> dict[str, Any]:
        """Cancel the task on the server and wait until this daemon's run of it is over (fail
        the test after `within`); the task as the server has it then."""
        await self.api.cancel(task_id)
        await eventually(lambda: task_id not in self.worker.runs, within=within)
        return await self.wait(task_id)

    async def started(self, task_id: str, within: float = 15.0) -> None:
        """Wait until the server holds the task `running`: this daemon's start was accepted.

        Being in `worker.runs` is not enough before a cancel: the start may not be sent yet,
        and a start refused for a cancelled task ends the run with no cancel to acknowledge."""

        async def running() -> bool:
            return (await self.api.get_task(task_id))["status"] == "running"

        await eventually(running, within=within, what=f"task {task_id} to be running")

    async def wait(self, task_id: str, within: float = 30.0) -> dict[str, Any]:
        """Poll until the task is terminal on the server; fail the test after `within`."""
        with anyio.fail_after(within):
            while True:
                task = await self.api.get_task(task_id)
                if task["status"] in FINAL:
                    return task
                await anyio.sleep(0.05)


@asynccontextmanager
async def running_daemon(
    home: Path,
    server_url: str,
    *,
    base_env: Mapping[str, str] | None = None,
    health: bool = False,
    policy: RetryPolicy | None = None,
    report_policy: RetryPolicy | None = None,
    circuit_cooldown: float = 30.0,
    outbox_interval: float = OUTBOX_INTERVAL,
    backends: Mapping[str, tuple[Backend, str]] | None = None,
    client_type: type[ServerClient] = ServerClient,
    control: bool = False,
    in_process: InProcess | None = None,
    prepare_lease_every: float = PREPARE_LEASE_EVERY,
    claim_budget: float = claims.BUDGET,
    claim_grace: float = control_rpc.GRACE,
    **env: str,
) -> AsyncIterator[RunningDaemon]:
    """Start a real worker against `server_url`; stop it gracefully on exit.

    With `health=True` the health port is served as well (from before registration to after
    the worker stopped, as `agent-daemon run` does), on a free port: see `health_url`.
    `policy`, `report_policy`, `circuit_cooldown` and `outbox_interval` shorten the client's
    retries, the circuit's pause and the outbox's re-send period for tests that break the server.
    `backends` are offered besides those found, and `client_type` (a `ServerClient` subclass)
    talks to the server: the seams through which a test makes one step of a task fail.
    `prepare_lease_every` is how often a task's prepare lease is renewed during its setup.
    `control` opens the server's control WebSocket; `in_process` (the embedded server's, started
    with it) subscribes the worker to its hub and sends its requests through the app in this
    process, as `agent-daemon run` does. `claim_budget` and `claim_grace` shorten how long a
    claim on the control socket waits for its answer (daemon/worker/claims.py).
    """
    settings = Settings.from_env(daemon_env(home, server_url, **env))
    finder = Finder(functools.partial(candidates, settings), detect)
    metrics = Metrics()
    circuit = CircuitBreaker(cooldown=circuit_cooldown, metrics=metrics)
    found = {**await available(settings), **(backends or {})}
    async with (
        make_http_client(
            server_url,
            settings.token,
            daemon.__version__,
            transport=in_process.transport() if in_process is not None else None,
        ) as http,
        server_client(server_url, settings.token) as user_http,
    ):
        budget = ShutdownBudget()
        client = client_type(
            http,
            metrics=metrics,
            circuit=circuit,
            policy=policy,
            report_policy=report_policy,
            budget=budget,
        )
        env = base_env if base_env is not None else {"PATH": os.environ.get("PATH", "")}
        worker = Worker(
            settings,
            client,
            found,
            reach=AgentReach.found(server_url, env),
            metrics=metrics,
            circuit=circuit,
            budget=budget,
            options=WorkerOptions(
                control=control,
                outbox_interval=outbox_interval,
                prepare_lease_every=prepare_lease_every,
                claim_budget=claim_budget,
                claim_grace=claim_grace,
                finder=finder,
            ),
        )
        if in_process is not None:
            in_process.hub.subscribe(worker.pickup)
        port: AbstractAsyncContextManager[str] = (
            serving_health(worker, metrics) if health else nullcontext("")
        )
        async with port as health_url, anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            # The health port shows registration and `running` as they happen (Worker.watch).
            await eventually(lambda: worker.status == "running")
            yield RunningDaemon(worker, TasksApi(user_http), metrics, settings, health_url)
            worker.request_stop()


@asynccontextmanager
async def serving_health(worker: Worker, metrics: Metrics, **options: float) -> AsyncIterator[str]:
    """The health port of `worker` on 127.0.0.1 with a free port; yields its base URL."""
    server = HealthServer("127.0.0.1:0", metrics, **options)
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        worker.attach_health(port)
        server.mount(CHECKOUT_PATH, CheckoutRoute(worker.workdirs))
        server.attach(
            worker.snapshot,
            worker.request_stop,
            token=worker.settings.token,
            lag=worker.runs.transcript_lag,
            stage=lambda: worker.status,
        )
        worker.watch(server.changed)
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


@asynccontextmanager
async def daemon_process(
    env: Mapping[str, str], *args: str, log: Path | None = None, python: Sequence[str] = ()
) -> AsyncIterator[anyio.abc.Process]:
    """`python -m daemon run` (or other args) as a real child process; killed if still alive.

    With `log`, its stderr (the daemon's log) goes to that file, for a test to wait on a line;
    `python` is the command that runs Python (default: this one), e.g. through `setpriv` as
    another user; a PYTHONPATH in `env` is kept after the project's root."""
    stderr = log.open("wb") if log is not None else None
    path = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    process = await anyio.open_process(
        [*(python or (sys.executable,)), "-m", "daemon", *(args or ("run",))],
        env={**ROOT_AGENTS_ACCEPTED, **env, "PYTHONPATH": path},
        stdout=None,
        stderr=stderr,
    )
    try:
        yield process
    finally:
        if stderr is not None:
            stderr.close()
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await process.wait()


@asynccontextmanager
async def cli_daemon(
    home: Path,
    agent_env: Mapping[str, str],
    backends: Mapping[str, tuple[Backend, str]] | None = None,
    **env: str,
) -> AsyncIterator[RunningDaemon]:
    """An embedded server and a daemon whose agents get `agent_env` (for the real CLIs), with
    `backends` offered besides those found."""
    async with (
        embedded_server(home / "server.db") as url,
        running_daemon(
            home,
            url,
            base_env=agent_env,
            backends=backends,
            MULTICA_SCRIPTED_BACKEND="0",
            **env,
        ) as d,
    ):
        yield d


def incidents(d: RunningDaemon, task_id: str | None = None) -> list[dict[str, Any]]:
    """The parsed lines of the daemon's timeouts.jsonl (only this task's, if given)."""
    path = d.settings.state_dir / "timeouts.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if task_id is None or r["task_id"] == task_id]


@asynccontextmanager
async def serving_daemon(home: Path, **options: Any) -> AsyncIterator[RunningDaemon]:
    """The embedded server (database in `home`) and a daemon against it, for one test; both
    share the token the daemon is given (`MULTICA_DAEMON_TOKEN=...`, else `TOKEN`)."""
    async with (
        embedded_server(
            home / "server.db", token=options.get("MULTICA_DAEMON_TOKEN", TOKEN)
        ) as url,
        running_daemon(home, url, **options) as d,
    ):
        yield d


class FullDisk:
    """A real file system with no space left: a 64 KiB tmpfs mounted at `path` and filled up.

    Directories and empty files can still be made; writing one byte fails with ENOSPC, as on a
    full disk. `make_room()` deletes the filler, as an operator freeing space would.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._filler = path / ".filler"

    def make_room(self) -> None:
        """Free the space again."""
        self._filler.unlink()

    def fill(self) -> None:
        """Take every free block."""
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                os.write(fd, bytes(4096))
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)


@contextmanager
def full_disk(path: Path) -> Iterator[FullDisk]:
    """Mount a tiny tmpfs at `path` (made if missing), fill it, unmount it afterwards.

    Mounting needs root (the tests' usual user here); elsewhere the test is skipped, saying so.
    """
    if os.geteuid() != 0:
        pytest.skip("a real full file system needs root to mount a tmpfs")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], check=True)
    try:
        disk = FullDisk(path)
        disk.fill()
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)
