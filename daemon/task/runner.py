"""Runs one claimed task: work directory, agent, drain loop, watchdog, terminal report."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from backends.base import Backend, Message, MessageType, RunResult, RunSpec, RunStatus
from daemon.config import Settings
from daemon.durations import format_duration
from daemon.errors import ServerError, TaskGoneError
from daemon.logs import short_id
from daemon.ops.metrics import Metrics, RunObserverMetrics
from daemon.protocol.models import Task, UsageEntry
from daemon.state.agents import AgentRecords
from daemon.state.outbox import Delivery, Outbox, TerminalReport
from daemon.statuses import TERMINAL_STATUSES
from daemon.task.activity import Activity
from daemon.task.incidents import Incident, IncidentLog
from daemon.task.outcome import Outcome, failed, from_result, stopped, terminal_call
from daemon.task.retries import RETRY_BACKOFF, backoff_delay, next_attempt
from daemon.task.transcript import Transcript
from daemon.task.watchdog import Verdict, Watchdog, WatchdogPolicy
from daemon.task.workspace import agent_env, build_prompt, work_dir, write_instructions

log = logging.getLogger(__name__)

TRANSCRIPT_CLOSE = 30.0
"""Seconds the final transcript flush keeps retrying; what is left then goes to the outbox."""
STOPPING_FLUSH = 2.0
STOPPING_REPORT = 3.0
"""Once the daemon is stopping: seconds for the final transcript flush, then for the rest of
the report (transcript leftovers, usage, terminal call); the outbox keeps what is not taken."""
EXIT_WAIT = 5.0
"""Seconds an agent gets to exit after closing stdout, when the exit grace is shorter."""
_RESULT = MessageType.RESULT


@dataclass
class RunContext:
    """What every runner shares: the server, the settings, the counters and the stores."""

    client: Any
    settings: Settings
    metrics: Metrics
    outbox: Outbox
    incidents: IncidentLog
    server_url: str
    base_env: Mapping[str, str] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    agents: AgentRecords | None = None
    """The state dir's record of running agents, read back after a crash (None: not kept)."""
    retry_backoff: tuple[float, ...] = RETRY_BACKOFF
    backoff_sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    """How the runner waits out a retry backoff (tests hand in one that records the delays)."""


class TaskRunner:
    """One task from `start` to its single terminal report."""

    def __init__(self, task: Task, backend: Backend, ctx: RunContext) -> None:
        self.task = task
        self.backend = backend
        self.ctx = ctx
        s = ctx.settings
        self.policy = WatchdogPolicy(s.idle_watchdog, s.tool_watchdog, s.first_output_timeout)
        self.activity = Activity(ctx.clock)
        self.watchdog: Watchdog | None = None
        self.transcript = Transcript(ctx.client, task.id, ctx.metrics)
        self.started_wall = time.time()
        self.pid: int | None = None
        self.retry = 0
        self.session_id = ""
        self._final: Message | None = None
        self._tools_at_stop: list[dict[str, object]] = []
        self._stop_scope = anyio.CancelScope()
        self._stop_reason = ""
        self._hurried = False
        self._ending: anyio.CancelScope | None = None
        self._counters = {t: ctx.metrics.backend_messages.labels(t.value) for t in MessageType}
        self.id = short_id(task.id)

    def stop(self, reason: str) -> None:
        """Interrupt the run (`shutdown`, `server_cancelled`, `server_terminal`, `gone`)."""
        if not self._stop_reason:
            self._stop_reason = reason
        self._stop_scope.cancel()
        if reason == "shutdown":
            self._hurry()

    def _hurry(self) -> None:
        """The daemon is stopping: end quickly, leaving what the server does not take to the
        outbox (re-sent on the next start) instead of holding the shutdown for minutes."""
        self._hurried = True
        self.transcript.hurry(STOPPING_FLUSH)
        if self._ending is not None:
            cutoff = anyio.current_time() + STOPPING_REPORT
            self._ending.deadline = min(self._ending.deadline, cutoff)

    async def run(self) -> Outcome:
        """Run the task to its end and report it exactly once; never raises a server error."""
        m = self.ctx.metrics
        m.tasks_running.inc()
        begun = self.ctx.clock()
        outcome = failed("internal error")
        try:
            outcome = await self._execute()
        finally:
            with anyio.CancelScope(shield=True):
                m.tasks_running.dec()
                m.tools_in_flight.dec(len(self.activity.tools))
                self.activity.tools.clear()
                await self._report(outcome)
                reason = outcome.failure_reason or "none"
                m.tasks_finished.labels(self.backend.name, outcome.status.value, reason).inc()
                m.task_duration.labels(self.backend.name).observe(self.ctx.clock() - begun)
        return outcome

    async def _execute(self) -> Outcome:
        s = self.ctx.settings
        workdir = work_dir(s.workspaces_root, self.task)
        write_instructions(workdir, self.task.agent.instructions)
        self.workdir = workdir
        try:
            await self.ctx.client.start_task(self.task.id)
        except TaskGoneError:
            return Outcome(RunStatus.CANCELLED, report=False)
        except ServerError as exc:
            log.warning("task %s: start not acknowledged, running anyway: %s", self.id, exc)
        spec = RunSpec(
            prompt=build_prompt(self.task),
            workdir=workdir,
            env=agent_env(self.ctx.base_env, self.task, self.ctx.server_url, workdir),
            task_id=self.task.id,
            model=self.task.agent.model,
            resume_session_id=self.task.prior_session_id,
            instructions=self.task.agent.instructions,
            extra_args=tuple(self.task.agent.custom_args),
            kill_grace=s.kill_grace,
            # An agent that closed stdout after its final result gets the whole exit grace.
            exit_wait=max(EXIT_WAIT, s.exit_grace),
            observer=RunObserverMetrics(self.ctx.metrics),
        )
        log.info("task %s: running backend=%s workdir=%s", self.id, self.backend.name, workdir)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.transcript.run)
            tg.start_soon(self._poll_status)
            outcome: Outcome | None = None
            with self._stop_scope:
                outcome = await self._bounded(spec)
            tg.cancel_scope.cancel()
        if outcome is None:
            outcome = stopped(self._stop_reason, self.session_id)
        await self.transcript.close(within=TRANSCRIPT_CLOSE)
        return outcome

    async def _bounded(self, spec: RunSpec) -> Outcome:
        """The attempts under the wall-clock cap, which covers every retry."""
        limit = self.ctx.settings.agent_timeout
        with anyio.CancelScope() as wall:
            if limit > 0:
                wall.deadline = anyio.current_time() + limit
            return await self._attempts(spec)
        final = self._final
        if final is not None and not final.is_error:
            # The cap struck during the exit grace: the agent's answer is in, so it stands.
            self._incident("wall_clock", limit, "completed", tools=self._tools_at_stop)
            return from_result(None, final, self.session_id)
        self._incident("wall_clock", limit, "fail", tools=self._tools_at_stop)
        return Outcome(
            RunStatus.TIMEOUT,
            error=f"task exceeded the wall-clock limit of {format_duration(limit)}",
            failure_reason="timeout",
            session_id=self.session_id,
        )

    async def _attempts(self, spec: RunSpec) -> Outcome:
        while True:
            outcome, verdict = await self._attempt(spec)
            self._tools_at_stop = []  # a wall clock striking during the backoff finds none
            if verdict is None:
                return outcome
            next_spec, why_not = next_attempt(
                spec,
                self.retry,
                self.ctx.settings.idle_retries,
                self.session_id,
                self.activity.tool_calls,
            )
            action = "retry" if next_spec is not None else "fail"
            self._incident(verdict.scope, verdict.threshold, action, verdict)
            if next_spec is None:
                error = verdict.describe() + (f"; not retried: {why_not}" if why_not else "")
                return replace(outcome, error=error)
            delay = backoff_delay(self.ctx.retry_backoff, self.retry)
            self.retry += 1
            log.warning(
                "task %s: retry %d in %ss after %s", self.id, self.retry, delay, verdict.scope
            )
            await self.ctx.backoff_sleep(delay)
            spec = next_spec

    async def _attempt(self, spec: RunSpec) -> tuple[Outcome, Verdict | None]:
        self.activity.restart()
        self._final = None
        final: Message | None = None
        result: RunResult | None = None
        agents = self.ctx.agents
        try:
            if agents is not None:
                await agents.starting(self.task.id, self.backend.name)
            with anyio.CancelScope() as attempt_scope:
                async with self.backend.start(spec) as agent:
                    self.pid = agent.pid
                    if agents is not None:
                        await agents.running(self.task.id, self.backend.name, agent.pid)
                    log.info("task %s: agent started pid=%d", self.id, agent.pid)
                    self.watchdog = Watchdog(self.policy, self.activity, agent.pending)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self.watchdog.watch, attempt_scope)
                        with anyio.CancelScope() as grace:
                            final = await self._drain(agent, grace)
                            result = await agent.result()
                        tg.cancel_scope.cancel()
                    final = self._final  # the grace may have cut the drain short before it returned
                    if final is not None and (result is None or result.exit_code is None):
                        result = self._lingered(final, result)
        except OSError as exc:
            return failed(f"could not start {self.backend.name}: {exc}", self.session_id), None
        finally:
            # Kept for a wall-clock incident, which is recorded after this attempt is gone.
            self._tools_at_stop = self.activity.tools_view()
            self.ctx.metrics.tools_in_flight.dec(len(self.activity.tools))
            self.activity.tools.clear()
            if agents is not None:  # the tree is killed by now: forget the record
                await agents.ended(self.task.id)
        verdict = self.watchdog.verdict if self.watchdog else None
        if verdict is not None and attempt_scope.cancelled_caught:
            self.ctx.metrics.watchdog_fires.labels(verdict.scope).inc()
            log.warning(
                "task %s: watchdog fired (%s): %s", self.id, verdict.scope, verdict.describe()
            )
            return Outcome(
                RunStatus.IDLE_WATCHDOG,
                error=verdict.describe(),
                failure_reason="idle_watchdog",
                session_id=self.session_id,
            ), verdict
        return from_result(result, final, self.session_id), None

    async def _drain(self, agent: Any, grace: anyio.CancelScope) -> Message | None:
        """Take every message: stamp activity, count it, queue it for the transcript."""
        final: Message | None = None
        activity, transcript = self.activity, self.transcript
        tools_gauge = self.ctx.metrics.tools_in_flight
        backlog = transcript.high_water
        # Counted locally and published whenever the queue runs dry (at least once per stdout
        # read): a Prometheus increment per message cost a seventh of the drain loop.
        counts = dict.fromkeys(MessageType, 0)
        try:
            async for message in agent.messages():
                before = len(activity.tools)
                activity.observe(message)
                counts[message.type] += 1
                if len(activity.tools) != before:
                    tools_gauge.inc(len(activity.tools) - before)
                if message.session_id:
                    self.session_id = message.session_id
                if message.type is _RESULT and final is None:
                    final = self._final = message
                    await agent.close_stdin()
                    if self.ctx.settings.exit_grace > 0:
                        grace.deadline = anyio.current_time() + self.ctx.settings.exit_grace
                else:
                    transcript.add(message)
                    if transcript.unsent >= backlog:
                        await transcript.keep_up()
                if not agent.pending():
                    self._publish(counts)
        finally:
            self._publish(counts)
        return final

    def _publish(self, counts: dict[MessageType, int]) -> None:
        for kind, n in counts.items():
            if n:
                self._counters[kind].inc(n)
                counts[kind] = 0

    def _lingered(self, final: Message, result: RunResult | None) -> RunResult | None:
        """The agent sent its final result but did not exit; it is killed, its result stands.

        Either the exit grace ran out while stdout stayed open (`result` is None), or stdout
        closed and the backend's bounded wait for the exit (`RunSpec.exit_wait`, at least the
        grace) ran out (exit code None).
        """
        grace = self.ctx.settings.exit_grace
        result_at = self.activity.result_at
        since = self.ctx.clock() - (self.activity.started_at if result_at is None else result_at)
        log.warning("task %s: agent did not exit %.1fs after its result; killed", self.id, since)
        if grace > 0:
            action = "fail" if final.is_error else "completed"
            self._incident("exit_grace", grace, action, idle=since)
        # A backend may call a run that did not exit failed; the result the agent sent decides.
        if result is not None and (result.status is RunStatus.COMPLETED or final.is_error):
            return result
        return None

    async def _poll_status(self) -> None:
        """Interrupt the run when the server says the task is over or gone; ignore blips."""
        while True:
            await anyio.sleep(self.ctx.settings.status_poll_interval)
            try:
                status = await self.ctx.client.task_status(self.task.id)
            except TaskGoneError:
                log.warning("task %s: server no longer knows it; stopping", self.id)
                self.stop("gone")
                return
            except ServerError as exc:
                log.debug("task %s: status poll failed: %s", self.id, exc)
                continue
            if status in TERMINAL_STATUSES:
                log.warning("task %s: server says %s; stopping", self.id, status)
                self.stop("server_cancelled" if status == "cancelled" else "server_terminal")
                return

    async def _report(self, outcome: Outcome) -> None:
        """The transcript's rest, usage, then exactly one terminal report; what the server does
        not take goes to the outbox (a transient `complete` failure stays a `complete`)."""
        task_id = self.task.id
        workdir = str(getattr(self, "workdir", ""))
        kind, body = terminal_call(outcome, workdir)
        if not kind:
            log.info("task %s: settled by the server (%s)", self.id, self._stop_reason)
        usage = tuple(UsageEntry.from_usage(u).model_dump(mode="json") for u in outcome.usage)
        report = TerminalReport(task_id, kind, body, tuple(self.transcript.pending()), usage)
        delivery = Delivery(report)
        with anyio.CancelScope() as self._ending:
            if self._hurried:
                self._ending.deadline = anyio.current_time() + STOPPING_REPORT
            await delivery.send(self.ctx.client, retry=not self._hurried)
        self._ending = None
        left = delivery.left
        if not left.empty:
            log.error(
                "task %s: %s not delivered, kept in the outbox: %s",
                self.id,
                left.kind or f"transcript ({len(left.messages)} messages)",
                delivery.error or "out of time while stopping",
            )
            self.ctx.outbox.put(left)
        if not kind:
            return
        log.info(
            "task %s: %s backend=%s%s",
            self.id,
            outcome.status.value,
            self.backend.name,
            f" reason={outcome.failure_reason}" if outcome.failure_reason else "",
        )

    def _incident(
        self,
        scope: str,
        threshold: float,
        action: str,
        verdict: Verdict | None = None,
        *,
        idle: float | None = None,
        tools: list[dict[str, object]] | None = None,
    ) -> None:
        """One line in timeouts.jsonl; a watchdog verdict was already counted when it fired."""
        if verdict is None:
            self.ctx.metrics.watchdog_fires.labels(scope).inc()
        if idle is None:
            idle = verdict.idle_seconds if verdict else self.activity.idle_seconds()
        if tools is None:
            tools = list(verdict.tools) if verdict else self.activity.tools_view()
        self.ctx.incidents.record(
            Incident(
                task_id=self.task.id,
                scope=scope,
                threshold=threshold,
                idle_seconds=idle,
                last_message_type=self.activity.last_type,
                retry=self.retry,
                action=action,
                pid=self.pid,
                tools_in_flight=tools,
                backend=self.backend.name,
            )
        )
