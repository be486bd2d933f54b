"""One claimed task's run: work directory, start acknowledgement, attempts under the wall clock
and the status poll, idle retries; it ends in exactly one outcome, which its reporter sends."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, AsyncExitStack, nullcontext
from dataclasses import replace
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from backends.base import Backend, RunSpec
from backends.process.identity import AgentUser
from daemon.config import Settings
from daemon.errors import AgentSetupError, LocalDirectoryError, TaskInputError
from daemon.logs import short_id
from daemon.ops.metrics import RunObserverMetrics
from daemon.protocol.models import Task
from daemon.protocol.pacing import Beat
from daemon.services import Services
from daemon.snapshot import FinishedSnapshot, RunSnapshot
from daemon.task.activity import Activity
from daemon.task.incidents import TaskIncidents
from daemon.task.localdir.hold import FolderHold
from daemon.task.localdir.resource import FAILURE_REASON
from daemon.task.mcp.overlay import start_mcp
from daemon.task.mcp.remote import DevOrigins
from daemon.task.outcome import Ending, Outcome, outcome_of
from daemon.task.prepare_lease import prepare_lease
from daemon.task.reporter import Reporter
from daemon.task.retries import Retries
from daemon.task.session_pin import ROLLOUT_FLUSH_WAIT, SessionPin, arrives, resumable_check
from daemon.task.setup.model_choice import choose
from daemon.task.setup.skill_bundles import resolve_skills
from daemon.task.setup.spec import LocalSetup, agent_spec, prepare
from daemon.task.setup.workspace import TaskDirs, remove_tree
from daemon.task.shared_beat import SharedBeat
from daemon.task.start import acknowledge_start
from daemon.task.status_poll import StatusNews, poll_status
from daemon.task.watchdog import WatchdogPolicy
from daemon.wakeup import Wakeup
from daemon.workdirs.git import Git
from daemon.workdirs.leases import TaskLease

log = logging.getLogger(__name__)

HELD_READS_MIN_WINDOW = 5.0
"""Seconds: a shorter idle or tool window has its agent's every line read as it comes. Held, a
line is read on the beat after it was printed (0.5 s; longer past 400 running tasks)."""


class TaskRun:
    """One task from `start` to its single terminal report."""

    def __init__(self, task: Task, backend: Backend, slot: int, services: Services) -> None:
        """`slot` is the lowest one no other running task holds (Multica's `MULTICA_TASK_SLOT`)."""
        self.task = task
        self.backend = backend
        self.slot = slot
        self.id = short_id(task.id)
        self._services = services
        self._mcp_config: Path | None = None
        self._user: AgentUser | None = None
        self._dirs: TaskDirs | None = None
        self._stop_reason = ""
        self._resumable: Callable[[str], bool] | None = None
        self._lease = TaskLease(services.leases)
        self._status_due = Wakeup()
        self._status_news = StatusNews(self._status_due)
        self._folder = FolderHold(task.id, services, self._status_due)
        self.reporter = Reporter(task.id, backend.name, services, self._status_news.heard)
        self.activity = Activity(services.clock)
        self.started_wall = time.time()
        self._incidents = TaskIncidents(
            services.incidents,
            task.id,
            backend.name,
            self.activity,
            services.metrics.watchdog_fires,
        )
        transcript = self.reporter.transcript
        self._retries = Retries(backend, services, self.activity, transcript, self._incidents)

    def snapshot(self) -> RunSnapshot:
        """This run now, as plain values for operations."""
        return RunSnapshot(
            id=self.task.id,
            backend=self.backend.name,
            started_wall=self.started_wall,
            retry=self._retries.retry,
            attempt=self._retries.snapshot(),
            activity=self.activity.snapshot(),
            state=self._retries.state,
            resumes=self._retries.resumes,
            transcript_lag=self.reporter.transcript.lag(),
        )

    def finished(self, outcome: Outcome | None) -> FinishedSnapshot:
        """This run once it has ended with `outcome` (None: it raised before deciding one)."""
        usage = outcome.usage if outcome is not None else ()
        return FinishedSnapshot(
            id=self.task.id,
            backend=self.backend.name,
            status=outcome.status.value if outcome is not None else "failed",
            reason=outcome.failure_reason if outcome is not None else "",
            started_wall=self.started_wall,
            ended_wall=time.time(),
            attempts=self._retries.retry + 1,
            resumes=self._retries.resumes,
            input_tokens=sum(u.input_tokens for u in usage),
            output_tokens=sum(u.output_tokens for u in usage),
            cache_read_tokens=sum(u.cache_read_tokens for u in usage),
            cache_write_tokens=sum(u.cache_write_tokens for u in usage),
        )

    def stop(self, reason: str) -> None:
        """Interrupt the run (`shutdown`, `server_cancelled`, `server_terminal`, `gone`)."""
        self._stop_reason = self._stop_reason or reason
        self._folder.interrupt()
        self._retries.stop(reason)

    def check_status(self) -> None:
        """Ask the server for the task's status now (it said the task was cancelled)."""
        self._status_due.set()

    async def run(self) -> Outcome:
        """Run the task to its end and report it exactly once; an error fails this task only."""
        m, backend = self._services.metrics, self.backend.name
        m.tasks_running.inc()
        clock = self._services.clock
        begun = clock()
        ending = Ending(error="internal error")
        try:
            services = self._services
            every = services.prepare_lease_every
            # The task's own MCP servers (plugin tools, brokers) serve until its agent stopped.
            async with AsyncExitStack() as clients, anyio.create_task_group() as servers:
                async with prepare_lease(services.client, self.task, every):
                    stopped = await self._prepare(clients, servers)
                if stopped is not None or self._dirs is None:
                    ending = stopped or ending
                else:
                    ending = await self._execute(self._dirs)
                servers.cancel_scope.cancel()
        except Exception as exc:
            # The error boundary of one task: whatever it raised (a 300-character workspace id,
            # a full disk, a backend's bug) fails this task alone, never the daemon's task group.
            ending = self._failed(exc, prepared=self._dirs is not None)
        finally:
            dirs = self._dirs
            with anyio.CancelScope(shield=True):
                # The worktree's work is committed as the agent's user, before it is released.
                delivered = await self._folder.settle(dirs.place if dirs else None)
                # Before the report: every process of the uid is killed before the server,
                # and so the next task of this agent, hears the task is over.
                await self._services.users.release(self._user)
                self._user = None
                outcome = await self._withheld(
                    outcome_of(ending, str(dirs.work_dir if dirs else ""))
                )
                outcome = outcome.delivered(*delivered)
                m.tasks_running.dec()
                await self.reporter.report(outcome)
                self._folder.release()  # after the report, as Go's daemon holds it
                reason = outcome.failure_reason
                m.tasks_finished.labels(backend, outcome.status.value, reason or "none").inc()
                m.count_tokens(backend, outcome.usage)
                m.task_duration.labels(backend).observe(clock() - begun)
                if dirs is not None:
                    # The task's private temp dir goes with it (the work dir stays for reuse).
                    await anyio.to_thread.run_sync(remove_tree, dirs.temp_dir)
                env_root = dirs.env_root if dirs else None
                in_place = dirs is not None and dirs.place is not None and dirs.place.in_place
                finish = functools.partial(self._lease.finish, local_directory=in_place)
                await anyio.to_thread.run_sync(finish, self.task, env_root)
        return outcome

    async def _prepare(self, clients: AsyncExitStack, servers: TaskGroup) -> Ending | None:
        """Directories, markers, skills and the MCP file, all before `start` (in a thread, as
        they are file I/O the event loop should not wait on); the ending instead of a run when
        the task must not run (its start refused, its local directory waited for in vain)."""
        services = self._services
        self.task = await resolve_skills(services.client, self.task, services.skill_cache)
        dev = DevOrigins.of(services.settings)
        backend, client = self.backend.name, services.client
        self.task = await start_mcp(self.task, backend, client, dev, servers, clients)
        root = services.settings.workspaces_root
        # A user of its own while its agent runs (one of a pool): its dirs are its uid's.
        user = self._user = await services.users.acquire()
        local = await self._folder.find(self.task, user)
        chat = bool(self.task.chat_session_id)
        if local is not None and not await self._folder.take(local, chat, self._beat(), self.stop):
            return Ending(stopped=self._stop_reason or "shutdown")
        setup = None
        if local is not None:
            git = services.workdirs.git if services.workdirs else Git(services.reach.base_env)
            setup = LocalSetup(local, git, services.folders)
        hold = self._lease.hold
        try:
            placed = await anyio.to_thread.run_sync(
                prepare, root, self.task, self.backend.name, user, hold, setup
            )
        finally:
            if local is not None and local.worktree:
                self._folder.release()  # a worktree task holds the folder for its snapshot
        self._dirs, self._mcp_config = placed
        return await acknowledge_start(services.client, self.task.id)

    async def _withheld(self, outcome: Outcome) -> Outcome:
        """The outcome, its session withheld when it is a Codex thread whose rollout never
        reached the disk: no later run could resume it, and the server must not offer it."""
        check, report = self._resumable, outcome.report
        if check is None or report is None or not report.session_id:
            return outcome
        if await arrives(check, report.session_id, ROLLOUT_FLUSH_WAIT):
            return outcome
        log.warning(
            "task %s: session %s has no rollout; not reported as resumable",
            self.id,
            report.session_id,
        )
        return outcome.without_session()

    def _failed(self, exc: Exception, *, prepared: bool) -> Ending:
        """The ending of a run that raised: logged with its traceback, one incident line; a
        local directory that cannot be used, with the sentence that says so."""
        if isinstance(inner := _unwrapped(exc), LocalDirectoryError):
            log.error("task %s: %s", self.id, inner)
            return Ending(error=str(inner), failure_reason=FAILURE_REASON)
        if isinstance(inner, AgentSetupError):  # a required remote MCP server cannot be used
            log.error("task %s: refusing to start the agent: %s", self.id, inner)
            return Ending(error=str(inner), failure_reason="")
        scope = "internal" if prepared else "prepare"
        what = "internal error" if prepared else "could not prepare the work directory"
        error = f"{what}: {_describe(exc)}"
        log.error("task %s: %s", self.id, error, exc_info=exc)
        self._incidents.failed(scope, error, self._retries.retry, self._retries.pid)
        return Ending(error=error)

    async def _execute(self, dirs: TaskDirs) -> Ending:
        client = self._services.client
        # The start is acknowledged (in `run`): the agent is about to start.
        progress = self._services.progress
        if progress is not None:
            progress.launching(self.task.id, self.backend.name)
        try:
            spec = await anyio.to_thread.run_sync(self._spec, dirs)
        except (TaskInputError, AgentSetupError) as exc:
            # A token not task-scoped, a bad custom_env name, a Codex config it cannot edit.
            log.error("task %s: refusing to start the agent: %s", self.id, exc)
            return Ending(error=str(exc), failure_reason="")
        choice = await choose(self.task, self.backend, self._services.catalogs)
        spec = replace(
            spec,
            model=choice.model,
            thinking_level=choice.thinking_level,
            service_tier=choice.service_tier,
        )
        log.info(
            "task %s: running backend=%s workdir=%s%s",
            self.id,
            self.backend.name,
            dirs.work_dir,
            " (reused)" if dirs.reused else "",
        )
        # The pins finish (each within its bound) before the terminal report, which then has
        # the last word on the task's session.
        async with anyio.create_task_group() as pins:
            resumable = self._resumable = resumable_check(self.backend.name, spec)
            pin = SessionPin(client, self.task.id, str(dirs.work_dir), pins, resumable)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.reporter.stream)
                beat, due, news = self._beat(), self._status_due, self._status_news
                tg.start_soon(poll_status, client, self.task.id, beat, self.stop, due, news)
                with self._checkouts(dirs):
                    ending = await self._retries.run(spec, pin.learned)
                tg.cancel_scope.cancel()
            pin.run_ended()
        # As Multica's daemon: only a run whose agent started and ended on its own is
        # "finishing"; one the server or a shutdown stopped is not.
        if progress is not None and not ending.stopped and self._retries.pid is not None:
            progress.finishing(self.task.id)
        await self.reporter.close()
        return ending

    def _beat(self) -> Beat:
        """When this task's status poll asks (paced with the daemon's load)."""
        every = self._services.settings.status_poll_interval
        pacing = self._services.pacing
        return Beat(
            functools.partial(pacing.status_interval, every),
            functools.partial(pacing.offset, self.task.id),
        )

    def _checkouts(self, dirs: TaskDirs) -> AbstractContextManager[None]:
        """While the agent runs, its token may check out repositories into its work dir, as
        the user the agent runs as."""
        workdirs = self._services.workdirs
        if workdirs is None:
            return nullcontext()
        return workdirs.task_window(self.task, dirs.work_dir, self._user)

    def _spec(self, dirs: TaskDirs) -> RunSpec:
        """The agent's spec, with how it reaches the daemon: its slot, the health port."""
        services = self._services
        observer = RunObserverMetrics(services.metrics)
        # The settings as this run sees them: its agent runs as the user it was handed.
        settings = services.settings.model_copy(update={"agent_identity": self._user})
        return agent_spec(
            self.task,
            self.backend.name,
            dirs,
            settings,
            observer,
            self._mcp_config,
            services.reach,
            self.slot,
            processes=services.processes,
            read_beat=self._read_beat(settings),
            containment=services.containment,
        )

    def _read_beat(self, settings: Settings) -> SharedBeat | None:
        """The beat a chatty agent's reads wait for (shared_beat.py); none under a watchdog
        window shorter than `HELD_READS_MIN_WINDOW`: a held line's activity is stamped when it
        is read, up to a beat after it was printed, and a busy agent would look idle."""
        window = WatchdogPolicy.of(settings, self.backend.name).since_last_line()
        if 0 < window < HELD_READS_MIN_WINDOW:
            return None
        return self.reporter.transcript.beat


def _unwrapped(exc: BaseException) -> BaseException:
    """The error itself, out of the task-group wrapping a raise in a task group arrives in."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """The error itself, out of the task-group wrapping a raise inside `_execute` arrives in."""
    exc = _unwrapped(exc)
    return str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
