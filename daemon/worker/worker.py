"""The daemon's lifecycle: start up, claim and run tasks, shut down in two stages.

A little past 300 lines on purpose: it reads top-down as one lifecycle (`run → startup → serve
→ shutdown`), and its own parts (the running tasks, pickup, registration, token renewal,
summary) are already modules beside it.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from backends.base import Backend
from backends.process import ProcessRegistry
from daemon.boundary.containment import contain
from daemon.boundary.pool import AgentPool
from daemon.config import Settings
from daemon.errors import RoundBoundary, RuntimeGoneError, ServerError
from daemon.local_skills.reader import LocalInventory
from daemon.multica_home import daemon_id, legacy_daemon_ids, profile_command_overrides
from daemon.ops.metrics import Metrics
from daemon.ops.provider_failures import ProviderFailures
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.client import ServerClient
from daemon.protocol.control_rpc import GRACE
from daemon.protocol.models import Task
from daemon.protocol.pacing import Pacing
from daemon.services import PREPARE_LEASE_EVERY, AgentReach, Services
from daemon.shutdown import CLAIM, ShutdownBudget
from daemon.snapshot import DaemonSnapshot, FinishedSnapshot
from daemon.state.agent_records import AgentRecords
from daemon.state.incidents import IncidentLog
from daemon.state.outbox import Outbox
from daemon.task.progress import Progress
from daemon.task.recovery import idle_retry_policy
from daemon.task.setup.skill_cache import SkillBundleCache
from daemon.workdirs.gc_loop import GcLoop
from daemon.workdirs.service import Workdirs
from daemon.worker.claims import BUDGET, Claims
from daemon.worker.cli_watch import CliWatch, Finder
from daemon.worker.heartbeats import Heartbeats
from daemon.worker.pickup import Pickup
from daemon.worker.profiles import Profiles
from daemon.worker.pushes import Pushes
from daemon.worker.registration import Listeners, Registration, recover_orphans
from daemon.worker.runs import Runs
from daemon.worker.summary import Summary
from daemon.worker.token_renewal import renew_once, renewal_loop

if TYPE_CHECKING:
    from daemon.task.outcome import Outcome  # the task machinery: imported once up (runs.py)
    from daemon.task.run import TaskRun

log = logging.getLogger(__name__)

OUTBOX_INTERVAL = 30.0
"""Seconds between re-sends of the outbox while the daemon runs (it is also flushed at start)."""
DEREGISTER_WITHIN = 2.0
"""Deregistering is a courtesy: a server that does not answer must not hold the exit."""
FINISHED_KEPT = 50
"""Ended tasks the snapshot shows, the latest ones."""


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """How the worker sits in its process; the defaults suit a worker embedded in another."""

    control: bool = False
    """Open the server's control WebSocket (a server in another process)."""
    subreaper: bool = False
    """Adopt orphaned agent processes: only a daemon that owns its process may."""
    outbox_interval: float = OUTBOX_INTERVAL
    prepare_lease_every: float = PREPARE_LEASE_EVERY
    """Seconds between a claimed task's lease renewals while its setup runs."""
    claim_budget: float = BUDGET
    """Seconds the server may take over a claim on the control socket (claims.py)."""
    claim_grace: float = GRACE
    """Seconds an answer on the control socket is waited for past its budget."""
    finder: Finder | None = None
    """How the command finds agent CLIs: CLIs installed later are looked for, and a custom
    runtime profile may be of any family it makes possible (None: only the backends given)."""


class Worker:
    """Registers with the server, heartbeats, claims up to its free slots, runs tasks."""

    def __init__(
        self,
        settings: Settings,
        client: ServerClient,
        backends: Mapping[str, tuple[Backend, str]],
        *,
        reach: AgentReach,
        metrics: Metrics,
        circuit: CircuitBreaker,
        budget: ShutdownBudget,
        options: WorkerOptions = WorkerOptions(),
    ) -> None:
        """`reach` is how agents reach the daemon and the server (`AgentReach.found`; its health
        port is set when the port is served: `attach_health`)."""
        finder = options.finder
        self.settings = settings
        self.client = client
        self.backends = dict(backends)
        self.metrics = metrics
        self.circuit = circuit
        self._status = "starting"
        self._watchers: list[Callable[[], None]] = []
        earlier = settings.state_dir / "daemon_id"
        self.daemon_id = daemon_id(settings.home, settings.daemon_id, settings.profile, earlier)
        legacy = legacy_daemon_ids(
            settings.home, socket.gethostname(), settings.profile, self.daemon_id, earlier
        )
        self.workdirs = Workdirs(
            settings.workspaces_root,
            reach.base_env,
            client.workspace_repos,
            metrics,
            shared=settings.agent_identity is not None,
        )
        profiles = Profiles(
            client,
            self._families,
            profile_command_overrides(settings.home, settings.profile),
            settings.device_name,
        )
        self._finder = finder
        self.registration = Registration(
            client,
            settings,
            self.backends,
            self.daemon_id,
            listeners=Listeners(repos=self.workdirs.learned, changed=self._changed),
            legacy_ids=legacy,
            profiles=profiles,
        )
        self.cli_watch = CliWatch(
            self.backends,
            self.registration,
            settings.cli_check_interval,
            finder=finder,
            busy=self._busy,
        )
        self.runs = Runs(budget, self._ended)
        self.summary = Summary()
        self.finished: deque[FinishedSnapshot] = deque(maxlen=FINISHED_KEPT)
        self.provider_failures = ProviderFailures(metrics)
        self.outbox_interval = options.outbox_interval
        # Off by default: a worker embedded in another process must not adopt its orphans.
        self.subreaper = options.subreaper
        self.services = Services(
            client=client,
            settings=settings,
            metrics=metrics,
            outbox=Outbox(settings.state_dir / "outbox", metrics),
            incidents=IncidentLog(settings.state_dir / "timeouts.jsonl"),
            budget=budget,
            idle_retry=idle_retry_policy(settings.idle_retries),
            reach=reach,
            records=AgentRecords(settings.state_dir / "agents"),
            processes=ProcessRegistry(),
            pacing=Pacing(lambda: len(self.runs), metrics),
            skill_cache=SkillBundleCache(settings.state_dir / "skill-cache"),
            workdirs=self.workdirs,
            agent_users=AgentPool(settings.agent_pool),
            prepare_lease_every=options.prepare_lease_every,
            daemon_id=self.daemon_id,
            progress=Progress(client),
        )
        self.outbox = self.services.outbox
        self.budget = budget
        self._stopping = anyio.Event()
        self._starting = anyio.CancelScope()
        url = reach.server_url
        inventory = LocalInventory(reach.base_env, settings.agent_identity)
        self.heartbeats = Heartbeats(
            self.registration, client, settings, inventory, models=self._model_list
        )
        self.pushes = Pushes(self.registration, self.heartbeats)
        self.pickup = Pickup(
            settings,
            self.runs,
            self.registration,
            url,
            options.control,
            self.pushes,
            self.heartbeats,
            metrics,
        )
        channel = self.pickup.channel
        self.claims = Claims(
            client,
            channel.calls if channel is not None else None,
            budget=options.claim_budget,
            grace=options.claim_grace,
        )
        self.gc = GcLoop(
            settings,
            client,
            self.services.leases,
            metrics,
            repo_locks=self.workdirs.cache,
            repo_in_use=self.workdirs.listed,
        )

    def _families(self) -> dict[str, Backend]:
        """Every backend a custom runtime profile may be of, by runtime type: those the
        settings make possible (the found ones as found)."""
        candidates = self._finder.candidates() if self._finder is not None else ()
        found = {name: backend for name, (backend, _) in self.backends.items()}
        return {b.name: b for b in candidates} | found

    def _busy(self, backend: str) -> bool:
        """Whether a task runs on the backend found under this name (not on a profile's)."""
        found = self.backends.get(backend)
        return found is not None and any(r.backend is found[0] for r in self.runs.values())

    async def _model_list(self, runtime_id: str) -> dict[str, Any]:
        """The model-list result of one of our runtimes (its CLI's catalog)."""
        runtime = self.registration.runtime(runtime_id)
        return await self.services.catalogs.result(runtime.backend if runtime else None)

    @property
    def status(self) -> str:
        """`starting`, `running` or `stopping`."""
        return self._status

    def watch(self, changed: Callable[[], None]) -> None:
        """Call `changed` (on the event loop) whenever what readiness rests on changes: the
        runtimes registered, the status. The health port builds its document then."""
        self._watchers.append(changed)

    def _changed(self) -> None:
        for changed in self._watchers:
            changed()

    def _enter(self, status: str) -> None:
        if status != self._status:
            self._status = status
            self._changed()

    @property
    def registered(self) -> bool:
        """True once the server knows our runtimes."""
        return bool(self.registration.runtimes)

    @property
    def workspaces(self) -> list[dict[str, str]]:
        """The workspaces this daemon serves (id and name)."""
        return self.registration.workspaces

    def attach_health(self, port: int) -> None:
        """The health port is served on `port`: agents started from now on reach the daemon
        there (`MULTICA_DAEMON_PORT`)."""
        reach = replace(self.services.reach, health_port=port)
        self.services = replace(self.services, reach=reach)

    def snapshot(self) -> DaemonSnapshot:
        """The daemon and its running tasks now, as plain values for the health port."""
        workspaces = tuple(
            (w["id"], w["name"], tuple(r.id for r in self.registration.by_workspace[w["id"]]))
            for w in self.workspaces
        )
        return DaemonSnapshot(
            status=self.status,
            daemon_id=self.daemon_id,
            device_name=self.settings.device_name,
            server_url=self.services.reach.server_url,
            registered=self.registered,
            max_concurrent_tasks=self.settings.max_concurrent_tasks,
            agents=tuple((name, version) for name, (_, version) in self.backends.items()),
            workspaces=workspaces,
            profile=self.settings.profile,
            server_circuit=self.circuit.state,
            outbox_depth=self.outbox.depth(),
            runs=self.runs.snapshot(),
            disk=self.gc.disk,
            provider_failures=self.provider_failures.snapshot(),
            finished=tuple(self.finished),
            agents_as_root=os.geteuid() == 0 and self.settings.agent_identity is None,
            containment=self.services.containment.name if self.services.containment else "",
            held_back_users=self.services.users.held_back(),
        )

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
            log.info("stopping: no new claims, %d tasks running", len(self.runs))
            self._enter("stopping")
            self._stopping.set()
            self.pickup.wake()
            self._starting.cancel()
            self.budget.drain()

    def stop_now(self) -> None:
        """Second stage: cancel every running task now (each is still reported)."""
        self.request_stop()
        self.runs.stop()

    async def startup(self) -> None:
        """Kill what a crashed run left, register, flush the outbox, recover orphans."""
        log.info("starting: daemon %s, backends %s", self.daemon_id, ", ".join(self.backends))
        records, processes = self.services.records, self.services.processes
        if self.subreaper:
            self.subreaper = processes.adopt_orphans()
        async with anyio.create_task_group() as recovering:
            if records is not None:
                # A crashed run's agents are lost already: killed outright (no grace), while
                # the daemon registers; startup ends, and claims begin, only once they are gone.
                recovering.start_soon(records.recover, 0.0)
            if self.services.containment is None:
                # Only a task needs it: probed while the daemon registers, a crashed run's
                # groups killed there as its agents are, and decided before the first claim.
                recovering.start_soon(self._contain)
            await renew_once(self.client, self.settings.profile)
            await self.registration.register_when_reachable()
            # Before recover-orphans: the server would fail every task still in flight, as
            # those whose `complete` waits in the outbox, and a result must never become a failure.
            left = await self.outbox.flush(self.client)
        await recover_orphans(self.client, self.registration.runtimes)
        self._enter("running")
        log.info(
            "started: %d runtimes in %d workspaces, outbox %d, runs contained by %s",
            len(self.registration.runtimes),
            len(self.workspaces),
            left,
            self.services.containment.name if self.services.containment else "nothing",
        )

    async def _contain(self) -> None:
        own = self.subreaper
        found = await anyio.to_thread.run_sync(lambda: contain(self.settings, own_process=own))
        self.services = replace(self.services, containment=found)

    async def serve(self) -> None:
        """Heartbeats, the outbox, signals and the claim loop, all under one task group."""
        async with anyio.create_task_group() as tg:
            await tg.start(self.heartbeats.run)
            tg.start_soon(self.registration.sync_loop)
            tg.start_soon(self.cli_watch.run)
            tg.start_soon(
                renewal_loop, self.client, self.settings.token_renew_interval, self.settings.profile
            )
            tg.start_soon(self._outbox_loop)
            await tg.start(self.pushes.run)
            if self.services.progress is not None:
                await tg.start(self.services.progress.run)
            tg.start_soon(self.pickup.listen)
            tg.start_soon(self.gc.run)
            tg.start_soon(self.workdirs.serve)
            tg.start_soon(self.runs.load)
            processes = self.services.processes
            if self.subreaper:
                tg.start_soon(processes.reap_adopted)
            async with anyio.create_task_group() as group:
                await self._claim_loop(group)
                await self.runs.drain(self.settings.shutdown_grace)
            tg.cancel_scope.cancel()

    async def shutdown(self) -> None:
        """Deregister and log the summary line."""
        self._enter("stopping")
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
        boundary = RoundBoundary("outbox")
        while True:
            await anyio.sleep(self.outbox_interval)
            with boundary:
                try:
                    if self.outbox.depth():
                        await self.outbox.flush(self.client)
                except OSError as exc:
                    # Out of file descriptors, a full disk: the reports stay where they are
                    # and the next round tries again; the daemon's other work must go on.
                    interval = self.outbox_interval
                    log.error("outbox: re-send failed, again in %ss: %s", interval, exc)

    async def _claim_loop(self, group: TaskGroup) -> None:
        """Claim only when a slot is free; again at once when a task finishes."""
        boundary = RoundBoundary("claim")
        while not self._stopping.is_set():
            free = self.settings.max_concurrent_tasks - len(self.runs)
            held = math.inf
            if free > 0 and self.registration.runtimes and self.circuit.allow():
                with boundary:
                    for task in self.pickup.claimed(self.runs.admit(await self._claim(free), free)):
                        backend = self.registration.backend_for(task)
                        self.runs.launch(group, task, backend, self.services)
                # A claim held back by a lost answer goes the moment its window ends. Asked
                # only after a claim: one not tried (no slot, circuit open) must not spin.
                held = self.claims.wait_at_most()
            await self.pickup.wait(held)

    async def _claim(self, free: int) -> list[Task]:
        # A claim still retrying against a failing server must not hold the shutdown for its
        # whole retry budget: once draining, its answer is awaited only briefly.
        with anyio.CancelScope() as claiming, self.budget.bounding(claiming, CLAIM):
            try:
                ids = self.registration.runtime_ids()
                return await self.claims.claim(self.daemon_id, ids, free)
            except RuntimeGoneError:
                await self.registration.register_again("claim")
            except ServerError as exc:
                log.warning("claim failed: %s", exc)
        return []

    def _ended(self, run: TaskRun, outcome: Outcome | None) -> None:
        """A run left its slot: count its ending, keep a provider's failure, claim again."""
        self.summary.add(outcome)
        self.finished.append(run.finished(outcome))
        if outcome is not None:
            self.provider_failures.record(
                run.task.id,
                run.backend.name,
                outcome.failure_reason,
                outcome.limit_resets,
            )
        self.pickup.wake()
