"""One attempt at a task: spawn the agent, drain it under the watchdog, give it the exit grace."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.to_thread

from backends.base import (
    AgentRun,
    Backend,
    Message,
    MessageType,
    RunResult,
    RunSpec,
    RunStatus,
    Usage,
)
from backends.cli_trust import UntrustedCliError
from daemon.logs import short_id
from daemon.services import Services
from daemon.snapshot import AttemptSnapshot, WatchdogSnapshot
from daemon.task.activity import Activity
from daemon.task.transcript import Transcript
from daemon.task.watchdog import Verdict, Watchdog, WatchdogPolicy

log = logging.getLogger(__name__)

_RESULT = MessageType.RESULT


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """What one attempt left behind, whether it ended, was stopped or was cut off."""

    final: Message | None = None
    """The agent's final result message, if it sent one."""
    result: RunResult | None = None
    """The agent's exit, or None when it was killed before one was known."""
    verdict: Verdict | None = None
    """The watchdog's verdict, when the watchdog ended the attempt."""
    tools: tuple[dict[str, object], ...] = ()
    """The tools in flight when the attempt stopped."""
    session_id: str = ""
    interrupted: bool = False
    """Stopped from outside or cut at the deadline before the agent was done."""
    lingered: float | None = None
    """Seconds since its result when an agent that did not exit was killed."""
    spawn_error: str = ""
    usage: tuple[Usage, ...] = ()
    """The agent's usage as its messages last said it (what a stopped agent had spent)."""
    retired_session: str = ""
    """The session the agent could not resume, going on in a fresh one instead."""


class Attempt:
    """Runs one agent process for a task; `stop()` ends it early, the result says how far it got."""

    def __init__(
        self,
        backend: Backend,
        spec: RunSpec,
        services: Services,
        activity: Activity,
        transcript: Transcript,
        *,
        deadline: float,
        session_id: str,
        on_session: Callable[[str], None] | None = None,
    ) -> None:
        """`deadline` is the wall clock's, on the event loop's clock; `session_id` the one the
        attempts so far left (this attempt keeps it unless its agent names another);
        `on_session` hears each session id the agent names (it must not block)."""
        self.backend = backend
        self.spec = spec
        self.activity = activity
        self.transcript = transcript
        self.metrics = services.metrics
        self.records = services.records
        settings = services.settings
        self.policy = WatchdogPolicy.of(settings, backend.name)
        self.exit_grace = settings.exit_grace
        self.session_id = session_id
        self._on_session = on_session
        self.pid: int | None = None
        self.watchdog: Watchdog | None = None
        self._scope = anyio.CancelScope(deadline=deadline)
        self._counters = {t: self.metrics.backend_messages.labels(t.value) for t in MessageType}
        self.id = short_id(spec.task_id)

    def snapshot(self) -> AttemptSnapshot:
        """The agent process and its watchdog now, as plain values for operations."""
        watchdog = self.watchdog.snapshot() if self.watchdog else WatchdogSnapshot()
        return AttemptSnapshot(self.pid, watchdog)

    def stop(self) -> None:
        """End the attempt now (the agent's tree is killed); also before it started."""
        self._scope.cancel()

    async def run(self) -> AttemptResult:
        """Spawn, drain and wait for the agent; never raises for the agent's own failures."""
        self.activity.restart()
        final: Message | None = None
        result: RunResult | None = None
        session_id = self.session_id
        retired = ""
        spent: tuple[Usage, ...] = ()
        try:
            with self._scope, anyio.CancelScope() as watched:
                async with self._agent() as (agent, watchdog), anyio.create_task_group() as tg:
                    tg.start_soon(watchdog.watch, watched)
                    # `final` and `session_id` live in this frame, so a grace or a deadline
                    # that cuts the drain short cannot lose them.
                    with anyio.CancelScope() as grace:
                        async with aclosing(self._drain(agent)) as drain:
                            async for message in drain:
                                if message.session_id:
                                    session_id = message.session_id
                                    if self._on_session is not None:
                                        self._on_session(session_id)
                                spent = message.usage or spent
                                retired = message.retired_session or retired
                                if message.type is _RESULT and final is None:
                                    final = message
                                    await agent.close_stdin()
                                    if self.exit_grace > 0:
                                        grace.deadline = anyio.current_time() + self.exit_grace
                        result = await agent.result()
                    tg.cancel_scope.cancel()
        except OSError as exc:
            error = f"could not start {self.backend.name}: {exc}"
            return AttemptResult(
                session_id=session_id, spawn_error=error, usage=spent, retired_session=retired
            )
        finally:
            tools_at_stop = self.activity.tools_view()
            # The one place the tools gauge comes down: every attempt passes through here.
            self.metrics.tools_in_flight.dec(len(self.activity.tools))
            self.activity.tools.clear()
        verdict = self.watchdog.verdict if self.watchdog and watched.cancelled_caught else None
        if verdict is not None:
            self.metrics.watchdog_fires.labels(verdict.scope).inc()
            log.warning(
                "task %s: watchdog fired (%s): %s", self.id, verdict.scope, verdict.describe()
            )
        lingered = None
        ended = not (watched.cancelled_caught or self._scope.cancelled_caught)
        if final is not None and ended and (result is None or result.exit_code is None):
            lingered = self._since_result()
            log.warning(
                "task %s: agent did not exit %.1fs after its result; killed", self.id, lingered
            )
            # A backend may call a run that did not exit failed; the result the agent sent decides.
            if result is not None and not (result.status is RunStatus.COMPLETED or final.is_error):
                result = None
        return AttemptResult(
            final=final,
            result=result,
            verdict=verdict,
            tools=tuple(tools_at_stop),
            session_id=session_id,
            interrupted=self._scope.cancelled_caught,
            lingered=lingered,
            usage=result.usage if result is not None else spent,
            retired_session=retired,
        )

    @asynccontextmanager
    async def _agent(self) -> AsyncIterator[tuple[AgentRun, Watchdog]]:
        """The agent process, recorded in the state dir while it runs, and its watchdog."""
        task_id, records = self.spec.task_id, self.records
        await self._refuse_untrusted()
        try:
            if records is not None:
                await records.starting(task_id, self.backend.name)
            async with self.backend.start(self.spec) as agent:
                self.pid = agent.pid
                if records is not None:
                    await records.running(task_id, self.backend.name, agent.pid)
                log.info("task %s: agent started pid=%d", self.id, agent.pid)
                self.watchdog = Watchdog(self.policy, self.activity, agent.pending)
                yield agent, self.watchdog
        finally:
            if records is not None:  # the tree is killed by now: forget the record
                await records.ended(task_id)

    async def _refuse_untrusted(self) -> None:
        """With an agent user, a CLI that anyone but root could change is not run (one task
        could have rewritten it for the next, under another uid of a pool): `OSError`."""
        check = getattr(self.backend, "refusal", None)
        if self.spec.user is None or check is None:
            return
        search_path = self.spec.env.get("PATH", os.defpath)
        why = await anyio.to_thread.run_sync(check, search_path)
        if why is not None:
            log.warning("task %s: %s refused: %s", self.id, self.backend.name, why)
            raise UntrustedCliError(why)

    async def _drain(self, agent: AgentRun) -> AsyncGenerator[Message]:
        """Every message: stamp activity, count it, queue it for the transcript, yield it."""
        activity, transcript = self.activity, self.transcript
        tools_gauge = self.metrics.tools_in_flight
        backlog = transcript.high_water
        # Counted locally and published whenever the queue runs dry (at least once per stdout
        # read): a Prometheus increment per message cost a seventh of the drain loop.
        counts = dict.fromkeys(MessageType, 0)
        try:
            async for message in agent.messages():
                before = len(activity.tools)
                message = activity.observe(message)
                counts[message.type] += 1
                if len(activity.tools) != before:
                    tools_gauge.inc(len(activity.tools) - before)
                if message.type is not _RESULT:
                    transcript.add(message)
                    if transcript.unsent >= backlog:
                        await transcript.keep_up()
                yield message
                if not agent.pending():
                    self._publish(counts)
        finally:
            self._publish(counts)

    def _publish(self, counts: dict[MessageType, int]) -> None:
        for kind, n in counts.items():
            if n:
                self._counters[kind].inc(n)
                counts[kind] = 0

    def _since_result(self) -> float:
        result_at = self.activity.result_at
        started = self.activity.started_at if result_at is None else result_at
        return self.activity.clock() - started
