"""One claimed task's run: work directory, start acknowledgement, attempts under the wall clock
and the status poll, idle retries; it ends in exactly one outcome, which its reporter sends."""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio

from backends.base import Backend, RunSpec
from daemon.config import Settings
from daemon.errors import ServerError, TaskGoneError
from daemon.logs import short_id
from daemon.ops.metrics import Metrics, RunObserverMetrics
from daemon.protocol.api import TaskServer
from daemon.protocol.models import Task
from daemon.protocol.retry import RetryPolicy
from daemon.shutdown import ShutdownBudget
from daemon.state.agents import AgentRecords
from daemon.state.outbox import Outbox
from daemon.task.activity import Activity
from daemon.task.attempt import Attempt, AttemptResult
from daemon.task.incidents import IncidentLog, TaskIncidents
from daemon.task.outcome import Ending, Outcome, decide
from daemon.task.pacing import Pacing
from daemon.task.recovery import next_attempt
from daemon.task.reporter import Reporter
from daemon.task.status_poll import poll_status
from daemon.task.watchdog import Watchdog
from daemon.task.workspace import agent_env, run_spec, work_dir, write_instructions
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
        clock: Callable[[], float] = time.monotonic,
        pacing: Pacing | None = None,
    ) -> None:
        self.task, self.backend = task, backend
        self._client, self._settings, self._metrics = client, settings, metrics
        self._agents = agents
        self._server_url, self._base_env = server_url, base_env
        self._retry, self._clock = retry, clock
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
        """Run the task to its end and report it exactly once; never raises a server error."""
        m, backend = self._metrics, self.backend.name
        m.tasks_running.inc()
        begun = self._clock()
        workdir: Path | None = None
        ending = Ending(error="internal error")
        try:
            workdir = work_dir(self._settings.workspaces_root, self.task)
            write_instructions(workdir, self.task.agent.instructions)
            ending = await self._execute(workdir)
        finally:
            with anyio.CancelScope(shield=True):
                outcome = decide(ending, str(workdir or ""))
                m.tasks_running.dec()
                await self.reporter.report(outcome)
                reason = outcome.failure_reason
                m.tasks_finished.labels(backend, outcome.status.value, reason or "none").inc()
                m.task_duration.labels(backend).observe(self._clock() - begun)
        return outcome

    async def _execute(self, workdir: Path) -> Ending:
        try:
            await self._client.start_task(self.task.id)
        except TaskGoneError:
            return Ending(stopped="gone")
        except ServerError as exc:
            log.warning("task %s: start not acknowledged, running anyway: %s", self.id, exc)
        observer = RunObserverMetrics(self._metrics)
        env = agent_env(self._base_env, self.task, self._server_url, workdir)
        spec = run_spec(self.task, workdir, env, self._settings, observer)
        log.info("task %s: running backend=%s workdir=%s", self.id, self.backend.name, workdir)
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
