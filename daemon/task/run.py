"""One claimed task's run: work directory, start acknowledgement, attempts under the wall clock
and the status poll, idle retries; it ends in exactly one outcome, which its reporter sends."""

from __future__ import annotations

import functools
import logging
import math
import shutil
import time
from collections.abc import Callable, Mapping
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
from daemon.task.agent_env import TaskPlace, agent_env
from daemon.task.attempt import Attempt, AttemptResult
from daemon.task.incidents import IncidentLog, TaskIncidents
from daemon.task.outcome import Ending, Outcome, decide
from daemon.task.pacing import Pacing
from daemon.task.prompt import build_prompt
from daemon.task.recovery import next_attempt
from daemon.task.reporter import Reporter
from daemon.task.runtime_brief import write_brief
from daemon.task.skills import write_skills
from daemon.task.start import acknowledge_start
from daemon.task.status_poll import poll_status
from daemon.task.watchdog import Watchdog
from daemon.task.workspace import (
    TaskDirs,
    prepare_dirs,
    resumable_session,
    run_spec,
    write_mcp_config,
)
from daemon.wakeup import Wakeup

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
    ) -> None:
        self.task, self.backend = task, backend
        self._client, self._settings, self._metrics = client, settings, metrics
        self._agents = agents
        self._server_url, self._base_env = server_url, base_env
        self._retry, self._clock = retry, clock
        # Where the agent reaches the daemon: its slot, the health port, the `multica` CLI.
        self.slot, self._health_port, self._multica_bin = slot, health_port, multica_bin
        self._mcp_config: Path | None = None
        self._pacing = pacing or Pacing()
        self.reporter = Reporter(
            task.id, backend.name, client, outbox, metrics, budget, self._pacing
        )
        self.activity = Activity(clock)
        fires = metrics.watchdog_fires
        self._incidents = TaskIncidents(incidents, task.id, backend.name, self.activity, fires)
        self.started_wall = time.time()
        self.retry = 0
        self._attempt: Attempt | None = None
        self._waiting = anyio.CancelScope()
        self._stop_reason = ""
        self._status_due = Wakeup()
        self.id = short_id(task.id)

    @property
    def pid(self) -> int | None:
        """The running agent's pid (the last one's between attempts)."""
        return self._attempt.pid if self._attempt else None

    @property
    def watchdog(self) -> Watchdog | None:
        """The current attempt's watchdog, once its agent started."""
        return self._attempt.watchdog if self._attempt else None

    def stop(self, reason: str) -> None:
        """Interrupt the run (`shutdown`, `server_cancelled`, `server_terminal`, `gone`)."""
        self._stop_reason = self._stop_reason or reason
        if self._attempt is not None:
            self._attempt.stop()
        self._waiting.cancel()

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
            dirs = self._prepare()
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
                    await anyio.to_thread.run_sync(_remove_tree, dirs.temp_dir)
        return outcome

    def _failed(self, exc: Exception, *, prepared: bool) -> Ending:
        """The ending of a run that raised: logged with its traceback, one incident line."""
        scope = "internal" if prepared else "prepare"
        what = "internal error" if prepared else "could not prepare the work directory"
        error = f"{what}: {_describe(exc)}"
        log.error("task %s: %s", self.id, error, exc_info=exc)
        self._incidents.failed(scope, error, self.retry, self.pid)
        return Ending(error=error)

    def _prepare(self) -> TaskDirs:
        """The task's directories, with its markers, skills and MCP file: all before `start`."""
        task, backend = self.task, self.backend.name
        dirs = prepare_dirs(self._settings.workspaces_root, task)
        write_skills(dirs.work_dir, backend, task.agent.skills)
        self._mcp_config = write_mcp_config(dirs, task)
        return dirs

    async def _execute(self, dirs: TaskDirs) -> Ending:
        refused = await acknowledge_start(self._client, self.task.id)
        if refused is not None:
            return refused
        try:
            spec = self._spec(dirs)
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
            tg.start_soon(
                poll_status, self._client, self.task.id, interval, self.stop, self._status_due
            )
            ending = await self._attempts(spec)
            tg.cancel_scope.cancel()
        await self.reporter.close()
        return ending

    def _spec(self, dirs: TaskDirs) -> RunSpec:
        """The brief in the work directory, then the prompt, environment and resume choice."""
        task = self.task
        write_brief(dirs.work_dir, self.backend.name, task)
        where = TaskPlace(
            server_url=self._server_url,
            work_dir=dirs.work_dir,
            temp_dir=dirs.temp_dir,
            config_root=dirs.config_root,
            workspaces_root=self._settings.workspaces_root,
            health_port=self._health_port,
            slot=self.slot,
            multica_bin=self._multica_bin,
            require_task_token=True,
        )
        env = agent_env(self._base_env, task, where)
        resume, lost = resumable_session(task, dirs)
        if lost:
            log.info("task %s: prior session not resumed: its work dir is not reused", self.id)
        return run_spec(
            task,
            dirs,
            env,
            self._settings,
            RunObserverMetrics(self._metrics),
            prompt=build_prompt(task, session_lost=lost),
            resume=resume,
            mcp_config=self._mcp_config,
        )

    async def _attempts(self, spec: RunSpec) -> Ending:
        """Attempts and their backoffs under the wall-clock cap, which covers every retry."""
        s, limit = self._settings, self._settings.agent_timeout
        deadline = anyio.current_time() + limit if limit > 0 else math.inf
        session = ""
        while True:
            attempt = self._attempt = Attempt(
                self.backend,
                spec,
                activity=self.activity,
                transcript=self.reporter.transcript,
                metrics=self._metrics,
                agents=self._agents,
                settings=s,
                deadline=deadline,
                session_id=session,
            )
            if self._stop_reason:
                attempt.stop()
            result = await attempt.run()
            session = result.session_id
            ending = self._ending(result, limit)
            if ending is not None or result.verdict is None:
                return ending or Ending(session, final=result.final, result=result.result)
            verdict, tool_calls = result.verdict, self.activity.tool_calls
            next_spec, delay, why_not = next_attempt(
                spec, self._retry, self.retry, session, tool_calls
            )
            action = "retry" if next_spec else "fail"
            self._incidents.record(
                verdict.scope, verdict.threshold, action, self.retry, self.pid, verdict=verdict
            )
            if next_spec is None:
                error = verdict.describe() + (f"; not retried: {why_not}" if why_not else "")
                return Ending(session, error=error, failure_reason="idle_watchdog")
            self.retry += 1
            why = verdict.scope
            log.warning("task %s: retry %d in %ss after %s", self.id, self.retry, delay, why)
            with anyio.CancelScope(deadline=deadline) as self._waiting:
                await self._retry.sleep(delay)
            if self._stop_reason or self._waiting.cancelled_caught:
                cut = AttemptResult(session_id=session, interrupted=True)
                return self._ending(cut, limit) or Ending(session, wall_clock=limit)
            spec = next_spec

    def _ending(self, result: AttemptResult, limit: float) -> Ending | None:
        """How the run ends after this attempt, or None when a watchdog verdict may retry."""
        session, final = result.session_id, result.final
        if self._stop_reason:
            return Ending(session, stopped=self._stop_reason)
        if result.interrupted:
            answered = final is not None and not final.is_error
            action = "completed" if answered else "fail"
            self._incidents.record("wall_clock", limit, action, self.retry, self.pid, result.tools)
            return Ending(session, wall_clock=limit, final=final)
        if result.spawn_error:
            return Ending(session, error=result.spawn_error)
        grace = self._settings.exit_grace
        if result.lingered is not None and grace > 0 and final is not None:
            action = "fail" if final.is_error else "completed"
            self._incidents.record(
                "exit_grace", grace, action, self.retry, self.pid, result.tools, result.lingered
            )
        return None


def _describe(exc: BaseException) -> str:
    """The error itself, out of the task-group wrapping a raise inside `_execute` arrives in."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
