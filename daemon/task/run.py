"""One claimed task's run: work directory, start acknowledgement, attempts under the wall clock
and the status poll, idle retries; it ends in exactly one outcome, which its reporter sends."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import anyio

from backends.base import Backend, RunSpec
from daemon.config import Settings
from daemon.errors import TaskTokenError
from daemon.logs import short_id
from daemon.ops.metrics import Metrics, RunObserverMetrics
from daemon.protocol.api import TaskServer
from daemon.protocol.models import Task
from daemon.protocol.retry import RetryPolicy
from daemon.shutdown import ShutdownBudget
from daemon.state.agents import AgentRecords
from daemon.state.outbox import Outbox
from daemon.task.activity import Activity
from daemon.task.attempts import Attempts
from daemon.task.incidents import IncidentLog, TaskIncidents
from daemon.task.outcome import Ending, Outcome, decide
from daemon.task.pacing import Pacing
from daemon.task.reporter import Reporter
from daemon.task.setup import AgentReach, agent_spec, describe_error, prepare, remove_tree
from daemon.task.start import acknowledge_start
from daemon.task.status_poll import StatusNews, poll_status
from daemon.task.watchdog import Watchdog
from daemon.task.workspace import (
    TaskDirs,
)
from daemon.wakeup import Wakeup
from daemon.workdirs.service import Workdirs

log = logging.getLogger(__name__)


class TaskRun:
    """One task from `start` to its single terminal report."""

    def __init__(
        self,
        task: Task,
        backend: Backend,
        *,
        client: TaskServer,
        settings: Settings,
        metrics: Metrics,
        outbox: Outbox,
        incidents: IncidentLog,
        budget: ShutdownBudget,
        agents: AgentRecords | None,
        server_url: str,
        base_env: Mapping[str, str],
        retry: RetryPolicy,
        slot: int = 0,
        health_port: int = 0,
        multica_bin: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        pacing: Pacing | None = None,
        workdirs: Workdirs | None = None,
    ) -> None:
        self.task, self.backend = task, backend
        self._client, self._settings, self._metrics = client, settings, metrics
        self._agents = agents
        self._server_url, self._base_env = server_url, base_env
        self._retry, self._clock = retry, clock
        # Where the agent reaches the daemon: its slot, the health port, the `multica` CLI.
        self.slot, self._health_port, self._multica_bin = slot, health_port, multica_bin
        self._mcp_config: Path | None = None
        self._workdirs = workdirs
        self._pacing = pacing or Pacing()
        self._status_due = Wakeup()
        self._status_news = StatusNews(self._status_due)
        told = self._status_news.heard
        self.reporter = Reporter(
            task.id, backend.name, client, outbox, metrics, budget, self._pacing, told
        )
        self.activity = Activity(clock)
        fires = metrics.watchdog_fires
        self._incidents = TaskIncidents(incidents, task.id, backend.name, self.activity, fires)
        self.started_wall = time.time()
        self._attempts = Attempts(
            backend,
            task_label=short_id(task.id),
            activity=self.activity,
            transcript=self.reporter.transcript,
            metrics=metrics,
            agents=agents,
            settings=settings,
            retry=retry,
            incidents=self._incidents,
        )
        self.id = short_id(task.id)

    @property
    def pid(self) -> int | None:
        """The running agent's pid (the last one's between attempts)."""
        return self._attempts.pid

    @property
    def retry(self) -> int:
        """Watchdog retries so far."""
        return self._attempts.retry

    @property
    def watchdog(self) -> Watchdog | None:
        """The current attempt's watchdog, once its agent started."""
        attempt = self._attempts.attempt
        return attempt.watchdog if attempt else None

    def stop(self, reason: str) -> None:
        """Interrupt the run (`shutdown`, `server_cancelled`, `server_terminal`, `gone`)."""
        self._attempts.stop(reason)

    def check_status(self) -> None:
        """Ask the server for the task's status now (it said the task was cancelled)."""
        self._status_due.set()

    async def run(self) -> Outcome:
        """Run the task to its end and report it exactly once; an error fails this task only."""
        m, backend = self._metrics, self.backend.name
        m.tasks_running.inc()
        begun = self._clock()
        dirs: TaskDirs | None = None
        ending = Ending(error="internal error")
        try:
            # Directories, markers, skills and the MCP file, all before `start`; in a thread,
            # as they are file I/O the event loop should not wait on.
            root = self._settings.workspaces_root
            placed = await anyio.to_thread.run_sync(prepare, root, self.task, self.backend.name)
            dirs, self._mcp_config = placed
            ending = await self._execute(dirs)
        except Exception as exc:
            # The error boundary of one task: whatever it raised (a 300-character workspace id,
            # a full disk, a backend's bug) fails this task alone, never the daemon's task group.
            ending = self._failed(exc, prepared=dirs is not None)
        finally:
            with anyio.CancelScope(shield=True):
                outcome = decide(ending, str(dirs.work_dir if dirs else ""))
                m.tasks_running.dec()
                await self.reporter.report(outcome)
                reason = outcome.failure_reason
                m.tasks_finished.labels(backend, outcome.status.value, reason or "none").inc()
                m.task_duration.labels(backend).observe(self._clock() - begun)
                if dirs is not None:
                    # The task's private temp dir goes with it (the work dir stays for reuse).
                    await anyio.to_thread.run_sync(remove_tree, dirs.temp_dir)
        return outcome

    def _failed(self, exc: Exception, *, prepared: bool) -> Ending:
        """The ending of a run that raised: logged with its traceback, one incident line."""
        scope = "internal" if prepared else "prepare"
        what = "internal error" if prepared else "could not prepare the work directory"
        error = f"{what}: {describe_error(exc)}"
        log.error("task %s: %s", self.id, error, exc_info=exc)
        self._incidents.failed(scope, error, self.retry, self.pid)
        return Ending(error=error)

    async def _execute(self, dirs: TaskDirs) -> Ending:
        refused = await acknowledge_start(self._client, self.task.id)
        if refused is not None:
            return refused
        try:
            spec = await anyio.to_thread.run_sync(self._spec, dirs)
        except TaskTokenError as exc:
            log.error("task %s: refusing to start the agent: %s", self.id, exc)
            return Ending(error=str(exc), failure_reason="")
        log.info(
            "task %s: running backend=%s workdir=%s%s",
            self.id,
            self.backend.name,
            dirs.work_dir,
            " (reused)" if dirs.reused else "",
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.reporter.stream)
            every = self._settings.status_poll_interval
            interval = functools.partial(self._pacing.status_interval, every)
            due, news = self._status_due, self._status_news
            tg.start_soon(poll_status, self._client, self.task.id, interval, self.stop, due, news)
            with self._checkouts(dirs):
                ending = await self._attempts.run(spec)
            tg.cancel_scope.cancel()
        await self.reporter.close()
        return ending

    def _checkouts(self, dirs: TaskDirs) -> AbstractContextManager[None]:
        """While the agent runs, its token may check out repositories into its work dir."""
        if self._workdirs is None:
            return nullcontext()
        return self._workdirs.task_window(self.task, dirs.work_dir)

    def _spec(self, dirs: TaskDirs) -> RunSpec:
        """The agent's spec, with how it reaches the daemon: its slot, the health port."""
        reach = AgentReach(
            self._server_url, self._base_env, self.slot, self._health_port, self._multica_bin
        )
        observer = RunObserverMetrics(self._metrics)
        # The daemon's one registry records every agent process, so none is lost as an orphan.
        processes = self._agents.processes if self._agents is not None else None
        return agent_spec(
            self.task,
            self.backend.name,
            dirs,
            self._settings,
            observer,
            self._mcp_config,
            reach,
            processes=processes,
        )
