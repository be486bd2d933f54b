"""The daemon's lifecycle: start up, claim and run tasks, shut down in two stages."""

from __future__ import annotations

import logging
import random
import signal
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup

import daemon
from backends.base import Backend
from daemon.config import Settings
from daemon.errors import DaemonError, PermanentServerError, RuntimeGoneError, ServerError
from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.client import ServerClient
from daemon.protocol.models import RuntimeInfo, Task
from daemon.state.agents import AgentRecords
from daemon.state.outbox import Outbox
from daemon.task.incidents import IncidentLog
from daemon.task.outcome import Outcome
from daemon.task.runner import RunContext, TaskRunner

log = logging.getLogger(__name__)

OUTBOX_INTERVAL = 30.0
REGISTER_BACKOFF_CAP = 30.0
"""Seconds between re-sends of the outbox while the daemon runs (it is also flushed at start)."""
STOPPING_REPORT = 3.0
"""Once the daemon is stopping, the most one terminal report may take; the outbox keeps the rest."""
STOPPING_CLAIM = 1.0
"""Once the daemon is stopping, how much longer a claim under way may take (its answer is
awaited, not its retries: the grace for running tasks starts only after it)."""
DEREGISTER_WITHIN = 2.0
"""Deregistering is a courtesy: a server that does not answer must not hold the exit."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """A server-side runtime: one backend registered in one workspace."""

    id: str
    workspace_id: str
    backend: Backend


class Worker:
    """Registers with the server, heartbeats, claims up to its free slots, runs tasks."""

    def __init__(
        self,
        settings: Settings,
        client: ServerClient,
        backends: Mapping[str, tuple[Backend, str]],
        *,
        server_url: str,
        metrics: Metrics,
        circuit: CircuitBreaker,
        base_env: Mapping[str, str],
        subreaper: bool = False,
        outbox_interval: float = OUTBOX_INTERVAL,
    ) -> None:
        self.settings = settings
        self.client = client
        self.backends = dict(backends)
        self.metrics = metrics
        self.circuit = circuit
        self.server_url = server_url
        self.status = "starting"
        self.daemon_id = settings.daemon_id or _stored_daemon_id(settings)
        self.runtimes: list[Runtime] = []
        self.workspaces: list[dict[str, str]] = []
        self.runners: dict[str, TaskRunner] = {}
        self.summary: Counter[str] = Counter()
        self.outbox = Outbox(settings.state_dir / "outbox", metrics)
        self.outbox_interval = outbox_interval
        self.agents = AgentRecords(settings.state_dir / "agents")
        # Off by default: a worker embedded in another process must not adopt its orphans.
        self.subreaper = subreaper
        self.ctx = RunContext(
            client=client,
            settings=settings,
            metrics=metrics,
            outbox=self.outbox,
            incidents=IncidentLog(settings.state_dir / "timeouts.jsonl"),
            server_url=server_url,
            base_env=base_env,
            agents=self.agents,
        )
        self._stopping = anyio.Event()
        self._starting = anyio.CancelScope()
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._claiming = anyio.CancelScope()

    @property
    def registered(self) -> bool:
        """True once the server knows our runtimes."""
        return bool(self.runtimes)

    async def run(self) -> None:
        """Start up, serve until asked to stop, shut down; the three stages, top-down."""
        async with anyio.create_task_group() as signals:
            # Signals are ours from the first moment: a SIGTERM while the server is still
            # unreachable at start-up must end the wait, not kill the process mid-recovery.
            signals.start_soon(self._signals)
            try:
                with self._starting:
                    await self.startup()
                if self.registered and not self._stopping.is_set():
                    await self.serve()
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                    await self.shutdown()
                signals.cancel_scope.cancel()

    def request_stop(self) -> None:
        """First stage of shutdown: stop claiming, let running tasks finish within the grace."""
        if not self._stopping.is_set():
            log.info("stopping: no new claims, %d tasks running", len(self.runners))
            self.status = "stopping"
            self._stopping.set()
            self._wake.set()
            self._starting.cancel()
            self.client.cut_reports(STOPPING_REPORT)
            cutoff = anyio.current_time() + STOPPING_CLAIM
            self._claiming.deadline = min(self._claiming.deadline, cutoff)

    def stop_now(self) -> None:
        """Second stage: cancel every running task now (each is still reported)."""
        self.request_stop()
        for runner in list(self.runners.values()):
            runner.stop("shutdown")

    async def startup(self) -> None:
        """Kill what a crashed run left, register, flush the outbox, recover orphans."""
        log.info("starting: daemon %s, backends %s", self.daemon_id, ", ".join(self.backends))
        if self.subreaper:
            self.subreaper = self.agents.adopt_orphans()
        await self.agents.recover(self.settings.kill_grace)
        await self._register_when_reachable()
        # Before recover-orphans: the server would fail every task still in flight, including
        # those whose `complete` waits in the outbox, and a result must never become a failure.
        left = await self.outbox.flush(self.client)
        for runtime in self.runtimes:
            try:
                result = await self.client.recover_orphans(runtime.id)
            except ServerError as exc:
                log.warning("recover-orphans for %s failed: %s", runtime.id, exc)
                continue
            if result.orphaned:
                log.warning(
                    "runtime %s: server failed %d orphaned tasks", runtime.id, result.orphaned
                )
        self.status = "running"
        log.info(
            "started: %d runtimes in %d workspaces, outbox %d",
            len(self.runtimes),
            len(self.workspaces),
            left,
        )

    async def _register_when_reachable(self) -> None:
        """Register, waiting out a server that is down or failing; a refusal is fatal."""
        delay = 1.0
        while True:
            try:
                await self._register()
                return
            except PermanentServerError as exc:
                raise DaemonError(f"the server refused the daemon's registration: {exc}") from None
            except ServerError as exc:
                log.warning("server not reachable for registration (%s); again in %ss", exc, delay)
            await anyio.sleep(delay)
            delay = min(delay * 2, REGISTER_BACKOFF_CAP)

    async def _register(self) -> None:
        workspaces = await self.client.workspaces()
        self.workspaces = [{"id": w.id, "name": w.name} for w in workspaces]
        infos = [
            RuntimeInfo(name=f"{name} ({self.settings.device_name})", type=name, version=version)
            for name, (_, version) in self.backends.items()
        ]
        runtimes: list[Runtime] = []
        for workspace in workspaces:
            answer = await self.client.register(
                workspace.id, self.daemon_id, self.settings.device_name, daemon.__version__, infos
            )
            for info, registered in zip(infos, answer.runtimes, strict=False):
                name = registered.provider if registered.provider in self.backends else info.type
                runtimes.append(Runtime(registered.id, workspace.id, self.backends[name][0]))
        self.runtimes = runtimes

    async def serve(self) -> None:
        """Heartbeats, the outbox, signals and the claim loop, all under one task group."""
        async with anyio.create_task_group() as tg:
            for runtime in self.runtimes:
                tg.start_soon(self._heartbeat, runtime)
            tg.start_soon(self._outbox_loop)
            if self.subreaper:
                tg.start_soon(self.agents.reap_adopted)
            # Every agent spawned by a run below is tracked in the daemon's one registry.
            with self.agents.processes.installed():
                async with anyio.create_task_group() as runners:
                    await self._claim_loop(runners)
                    await self._drain_running()
            tg.cancel_scope.cancel()

    async def shutdown(self) -> None:
        """Deregister and log the summary line."""
        self.status = "stopping"
        ids = [r.id for r in self.runtimes]
        if ids:
            with anyio.move_on_after(DEREGISTER_WITHIN) as bounded:
                try:
                    await self.client.deregister(ids)
                except ServerError as exc:
                    log.warning("deregister failed: %s", exc)
            if bounded.cancelled_caught:
                log.warning("deregister: no answer within %.0fs", DEREGISTER_WITHIN)
        s = self.summary
        log.info(
            "stopped: %d completed, %d failed, %d idle_watchdog, %d timeout, %d cancelled",
            s["completed"],
            s["failed"],
            s["idle_watchdog"],
            s["timeout"],
            s["cancelled"],
        )

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
            async for signum in received:
                if self._stopping.is_set():
                    log.warning(
                        "second %s: cancelling running tasks now", signal.Signals(signum).name
                    )
                    self.stop_now()
                else:
                    log.info("%s received", signal.Signals(signum).name)
                    self.request_stop()

    async def _heartbeat(self, runtime: Runtime) -> None:
        """Heartbeat one runtime on its own schedule; nothing else can delay it."""
        interval = self.settings.heartbeat_interval
        await anyio.sleep(random.uniform(0, interval))
        while True:
            try:
                await self.client.heartbeat(runtime.id)
            except RuntimeGoneError:
                log.warning("runtime %s unknown to the server: registering again", runtime.id)
                try:
                    await self._register()
                except ServerError as exc:
                    log.warning("re-register failed: %s", exc)
            except ServerError as exc:
                log.warning("heartbeat %s failed: %s", runtime.id, exc)
            await anyio.sleep(interval)

    async def _outbox_loop(self) -> None:
        while True:
            await anyio.sleep(self.outbox_interval)
            if self.outbox.depth():
                await self.outbox.flush(self.client)

    async def _claim_loop(self, runners: TaskGroup) -> None:
        """Claim only when a slot is free; again at once when a task finishes."""
        while not self._stopping.is_set():
            free = self.settings.max_concurrent_tasks - len(self.runners)
            if free > 0 and self.circuit.allow():
                for task in await self._claim(free):
                    self._launch(runners, task)
            wait = self.settings.poll_interval * random.uniform(0.8, 1.2)
            with anyio.move_on_after(wait):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def _claim(self, free: int) -> list[Task]:
        # `request_stop` bounds this scope: a claim still retrying against a failing server
        # must not hold the shutdown for its whole retry budget.
        with anyio.CancelScope() as self._claiming:
            try:
                return await self.client.claim(self.daemon_id, [r.id for r in self.runtimes], free)
            except RuntimeGoneError:
                log.warning("claim: runtime unknown to the server: registering again")
                try:
                    await self._register()
                except ServerError as exc:
                    log.warning("re-register failed: %s", exc)
            except ServerError as exc:
                log.warning("claim failed: %s", exc)
        return []

    def _launch(self, runners: TaskGroup, task: Task) -> None:
        backend = self._backend_for(task)
        runner = TaskRunner(task, backend, self.ctx)
        self.runners[task.id] = runner
        self.metrics.tasks_claimed.labels(backend.name).inc()
        log.info("task %s: claimed backend=%s", short_id(task.id), backend.name)
        self._idle = anyio.Event()
        runners.start_soon(self._run_one, runner, name=f"task {short_id(task.id)}")

    def _backend_for(self, task: Task) -> Backend:
        for runtime in self.runtimes:
            if runtime.id == task.runtime_id:
                return runtime.backend
        if task.backend in self.backends:
            return self.backends[task.backend][0]
        return next(iter(self.backends.values()))[0]

    async def _run_one(self, runner: TaskRunner) -> None:
        outcome: Outcome | None = None
        try:
            outcome = await runner.run()
        finally:
            self.runners.pop(runner.task.id, None)
            self.summary[_summary_label(outcome)] += 1
            self._wake.set()
            if not self.runners:
                self._idle.set()

    async def _drain_running(self) -> None:
        """Let running tasks finish within the shutdown grace, then cancel the rest."""
        if not self.runners:
            return
        grace = self.settings.shutdown_grace
        log.info("waiting up to %ss for %d running tasks", grace, len(self.runners))
        with anyio.move_on_after(grace):
            await self._idle.wait()
        if self.runners:
            log.warning("shutdown grace over: cancelling %d tasks", len(self.runners))
            self.stop_now()


def _summary_label(outcome: Outcome | None) -> str:
    """The word a finished task adds to the shutdown summary line."""
    if outcome is None:
        return "failed"
    if outcome.failure_reason in ("idle_watchdog", "timeout", "cancelled"):
        return outcome.failure_reason
    return outcome.status.value


def _stored_daemon_id(settings: Settings) -> str:
    """A daemon id that survives restarts, kept in the state directory."""
    path = settings.state_dir / "daemon_id"
    try:
        stored = path.read_text().strip()
        if stored:
            return stored
    except OSError:
        pass
    new = str(uuid.uuid4())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new + "\n")
    return new
