"""The daemon's lifecycle: start up, claim and run tasks, shut down in two stages."""

from __future__ import annotations

import logging
import shutil
import signal
from collections.abc import Mapping
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from backends.base import Backend
from daemon.config import Settings
from daemon.errors import RuntimeGoneError, ServerError
from daemon.logs import short_id
from daemon.multica_home import daemon_id
from daemon.ops.metrics import Metrics
from daemon.pickup import Pickup
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.client import ServerClient
from daemon.protocol.models import Task
from daemon.registration import Registration, recover_orphans
from daemon.shutdown import CLAIM, ShutdownBudget
from daemon.snapshot import DaemonSnapshot
from daemon.state.agents import AgentRecords
from daemon.state.outbox import Outbox
from daemon.summary import Summary
from daemon.task.incidents import IncidentLog
from daemon.task.outcome import Outcome
from daemon.task.pacing import Pacing
from daemon.task.recovery import idle_retry_policy
from daemon.task.run import TaskRun
from daemon.token_renewal import renew_once, renewal_loop
from daemon.workdirs.service import Workdirs
from daemon.worker_snapshot import worker_snapshot

log = logging.getLogger(__name__)

OUTBOX_INTERVAL = 30.0
"""Seconds between re-sends of the outbox while the daemon runs (it is also flushed at start)."""
DEREGISTER_WITHIN = 2.0
"""Deregistering is a courtesy: a server that does not answer must not hold the exit."""


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
        budget: ShutdownBudget,
        subreaper: bool = False,
        outbox_interval: float = OUTBOX_INTERVAL,
        control: bool = False,
    ) -> None:
        self.settings = settings
        self.client = client
        self.backends = dict(backends)
        self.metrics = metrics
        self.circuit = circuit
        self.server_url = server_url
        self.status = "starting"
        self.daemon_id = daemon_id(
            settings.home, settings.daemon_id, settings.profile, settings.state_dir / "daemon_id"
        )
        self.workdirs = Workdirs(settings.workspaces_root, base_env, client.workspace_repos)
        self.registration = Registration(
            client, settings, self.backends, self.daemon_id, on_repos=self.workdirs.learned
        )
        self.runners: dict[str, TaskRun] = {}
        self.summary = Summary()
        self.outbox = Outbox(settings.state_dir / "outbox", metrics)
        self.outbox_interval = outbox_interval
        self.agents = AgentRecords(settings.state_dir / "agents")
        # Off by default: a worker embedded in another process must not adopt its orphans.
        self.subreaper = subreaper
        self.incidents = IncidentLog(settings.state_dir / "timeouts.jsonl")
        self.base_env = base_env
        self.health_port = 0
        """The health port's bound port (set when it attaches): agents reach the daemon there."""
        found = shutil.which("multica", path=base_env.get("PATH") or None)
        self.multica_bin = Path(found) if found else None
        self.budget = budget
        self.idle_retry = idle_retry_policy(settings.idle_retries)
        self._stopping = anyio.Event()
        self._starting = anyio.CancelScope()
        self.pacing = Pacing(lambda: len(self.runners))
        self.pickup = Pickup(settings, self.runners, self.registration, server_url, control)
        self._idle = anyio.Event()

    @property
    def registered(self) -> bool:
        """True once the server knows our runtimes."""
        return bool(self.registration.runtimes)

    @property
    def workspaces(self) -> list[dict[str, str]]:
        """The workspaces this daemon serves (id and name)."""
        return self.registration.workspaces

    def snapshot(self) -> DaemonSnapshot:
        """The daemon and its running tasks now, as plain values for the health port."""
        return worker_snapshot(self)

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
            self.pickup.wake()
            self._starting.cancel()
            self.budget.drain()

    def stop_now(self) -> None:
        """Second stage: cancel every running task now (each is still reported)."""
        self.request_stop()
        self.budget.stop()
        for runner in list(self.runners.values()):
            runner.stop("shutdown")

    async def startup(self) -> None:
        """Kill what a crashed run left, register, flush the outbox, recover orphans."""
        log.info("starting: daemon %s, backends %s", self.daemon_id, ", ".join(self.backends))
        if self.subreaper:
            self.subreaper = self.agents.adopt_orphans()
        await self.agents.recover(self.settings.kill_grace)
        await renew_once(self.client, self.settings.profile)
        await self.registration.register_when_reachable()
        # Before recover-orphans: the server would fail every task still in flight, including
        # those whose `complete` waits in the outbox, and a result must never become a failure.
        left = await self.outbox.flush(self.client)
        await recover_orphans(self.client, self.registration.runtimes)
        self.status = "running"
        log.info(
            "started: %d runtimes in %d workspaces, outbox %d",
            len(self.registration.runtimes),
            len(self.workspaces),
            left,
        )

    async def serve(self) -> None:
        """Heartbeats, the outbox, signals and the claim loop, all under one task group."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.registration.heartbeats)
            tg.start_soon(self.registration.sync_loop)
            tg.start_soon(
                renewal_loop, self.client, self.settings.token_renew_interval, self.settings.profile
            )
            tg.start_soon(self._outbox_loop)
            tg.start_soon(self.pickup.listen)
            tg.start_soon(self.workdirs.serve)
            if self.subreaper:
                tg.start_soon(self.agents.reap_adopted)
            async with anyio.create_task_group() as runners:
                await self._claim_loop(runners)
                await self._drain_running()
            tg.cancel_scope.cancel()

    async def shutdown(self) -> None:
        """Deregister and log the summary line."""
        self.status = "stopping"
        ids = [r.id for r in self.registration.runtimes]
        if ids:
            with anyio.move_on_after(DEREGISTER_WITHIN) as bounded:
                try:
                    await self.client.deregister(ids)
                except ServerError as exc:
                    log.warning("deregister failed: %s", exc)
            if bounded.cancelled_caught:
                log.warning("deregister: no answer within %.0fs", DEREGISTER_WITHIN)
        log.info("%s", self.summary.line())

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

    async def _outbox_loop(self) -> None:
        while True:
            await anyio.sleep(self.outbox_interval)
            try:
                if self.outbox.depth():
                    await self.outbox.flush(self.client)
            except OSError as exc:
                # Out of file descriptors, a full disk: the reports stay where they are and
                # the next round tries again; the daemon's other work must not end over it.
                log.error("outbox: re-send failed, again in %ss: %s", self.outbox_interval, exc)

    async def _claim_loop(self, runners: TaskGroup) -> None:
        """Claim only when a slot is free; again at once when a task finishes."""
        while not self._stopping.is_set():
            free = self.settings.max_concurrent_tasks - len(self.runners)
            if free > 0 and self.registration.runtimes and self.circuit.allow():
                for task in await self._claim(free):
                    self._launch(runners, task)
            await self.pickup.wait()

    async def _claim(self, free: int) -> list[Task]:
        # A claim still retrying against a failing server must not hold the shutdown for its
        # whole retry budget: once draining, its answer is awaited only briefly.
        with anyio.CancelScope() as claiming, self.budget.bounding(claiming, CLAIM):
            try:
                ids = self.registration.runtime_ids()
                return self.pickup.claimed(await self.client.claim(self.daemon_id, ids, free))
            except RuntimeGoneError:
                await self.registration.register_again("claim")
            except ServerError as exc:
                log.warning("claim failed: %s", exc)
        return []

    def _launch(self, runners: TaskGroup, task: Task) -> None:
        backend = self.registration.backend_for(task)
        runner = TaskRun(
            task,
            backend,
            client=self.client,
            settings=self.settings,
            metrics=self.metrics,
            outbox=self.outbox,
            incidents=self.incidents,
            budget=self.budget,
            agents=self.agents,
            server_url=self.server_url,
            base_env=self.base_env,
            retry=self.idle_retry,
            slot=self._free_slot(),
            health_port=self.health_port,
            multica_bin=self.multica_bin,
            pacing=self.pacing,
            workdirs=self.workdirs,
        )
        self.runners[task.id] = runner
        self.metrics.tasks_claimed.labels(backend.name).inc()
        log.info("task %s: claimed backend=%s", short_id(task.id), backend.name)
        self._idle = anyio.Event()
        runners.start_soon(self._run_one, runner, name=f"task {short_id(task.id)}")

    def _free_slot(self) -> int:
        """The lowest slot no running task holds (Multica's `MULTICA_TASK_SLOT`, from 0)."""
        taken = {r.slot for r in self.runners.values()}
        return next(n for n in range(len(taken) + 1) if n not in taken)

    async def _run_one(self, runner: TaskRun) -> None:
        outcome: Outcome | None = None
        try:
            outcome = await runner.run()
        except Exception:
            # `run` fails its own task on any error; this guards the rest of the daemon from a
            # defect in that very path (deciding or reporting), which must not end `runners`.
            log.exception("task %s: run ended by an unexpected error", runner.id)
        finally:
            self.runners.pop(runner.task.id, None)
            self.summary.add(outcome)
            self.pickup.wake()
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
