"""A task's attempts in turn: the first agent run, then watchdog retries with their backoff, all
under the wall clock, which covers every retry; the loop ends in the run's one `Ending`."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import replace

import anyio

from backends.base import Backend, RunSpec
from backends.json_lines import UNRECOGNISED_REASON, unrecognised_error
from daemon.logs import short_id
from daemon.services import Services
from daemon.snapshot import AttemptSnapshot
from daemon.task.activity import Activity
from daemon.task.attempt import Attempt, AttemptResult
from daemon.task.incidents import TaskIncidents
from daemon.task.outcome import Ending
from daemon.task.recovery import next_attempt
from daemon.task.transcript import Transcript

log = logging.getLogger(__name__)


class Retries:
    """The attempts of one task, one at a time; `stop` ends the current one and the loop."""

    def __init__(
        self,
        backend: Backend,
        services: Services,
        activity: Activity,
        transcript: Transcript,
        incidents: TaskIncidents,
    ) -> None:
        self.backend = backend
        self._services = services
        self._activity = activity
        self._transcript = transcript
        self._incidents = incidents
        self.retry = 0
        """Retries so far."""
        self.resumes = 0
        """Retries that resumed the agent's session."""
        self.waiting = False
        """Between attempts: the backoff before the next one."""
        self.attempt: Attempt | None = None
        self.stop_reason = ""
        self.retired_session = ""
        """The first session an attempt could not resume (it went on in a fresh one)."""
        self._waiting = anyio.CancelScope()

    @property
    def pid(self) -> int | None:
        """The running agent's pid (the last one's between attempts)."""
        return self.attempt.pid if self.attempt else None

    def snapshot(self) -> AttemptSnapshot:
        """The current attempt (the last one between attempts), as plain values."""
        return self.attempt.snapshot() if self.attempt else AttemptSnapshot()

    @property
    def state(self) -> str:
        """`starting`, `running`, `in a tool` or `retrying`, for operations."""
        if self.waiting:
            return "retrying"
        if self.attempt is None or self.attempt.pid is None:
            return "starting"
        return "in a tool" if self._activity.tools else "running"

    def stop(self, reason: str) -> None:
        """End the current attempt (or backoff) and the loop, for `reason`."""
        self.stop_reason = self.stop_reason or reason
        if self.attempt is not None:
            self.attempt.stop()
        self._waiting.cancel()

    async def run(self, spec: RunSpec, on_session: Callable[[str], None] | None = None) -> Ending:
        """Attempts and their backoffs under the wall-clock cap, which covers every retry;
        `on_session` hears each session id an agent names. The ending names the session an
        attempt could not resume, if one could not."""
        ending = await self._attempts(spec, on_session)
        return replace(ending, retired_session=self.retired_session)

    async def _attempts(self, spec: RunSpec, on_session: Callable[[str], None] | None) -> Ending:
        label = short_id(spec.task_id)
        retry_policy = self._services.idle_retry
        limit = self._services.settings.agent_timeout
        deadline = anyio.current_time() + limit if limit > 0 else math.inf
        session = ""
        while True:
            attempt = self.attempt = Attempt(
                self.backend,
                spec,
                self._services,
                self._activity,
                self._transcript,
                deadline=deadline,
                session_id=session,
                on_session=on_session,
            )
            if self.stop_reason:
                attempt.stop()
            result = await attempt.run()
            session = result.session_id
            self.retired_session = self.retired_session or result.retired_session
            ending = self._ending(result, limit)
            if ending is not None or result.verdict is None:
                return ending or Ending(session, final=result.final, result=result.result)
            verdict, tool_calls = result.verdict, self._activity.tool_calls
            if verdict.scope == "unrecognised":
                return self._unrecognised(result)
            next_spec, delay, why_not = next_attempt(
                spec, retry_policy, self.retry, session, tool_calls
            )
            action = "retry" if next_spec else "fail"
            self._incidents.record(
                verdict.scope, verdict.threshold, action, self.retry, self.pid, verdict=verdict
            )
            if next_spec is None:
                error = verdict.describe() + (f"; not retried: {why_not}" if why_not else "")
                return Ending(
                    session, error=error, failure_reason="idle_watchdog", usage=result.usage
                )
            self.retry += 1
            self.resumes += 1 if next_spec.resume_session_id else 0
            why = verdict.scope
            log.warning("task %s: retry %d in %ss after %s", label, self.retry, delay, why)
            self.waiting = True
            try:
                with anyio.CancelScope(deadline=deadline) as self._waiting:
                    await retry_policy.sleep(delay)
            finally:
                self.waiting = False
            if self.stop_reason or self._waiting.cancelled_caught:
                cut = AttemptResult(session_id=session, interrupted=True)
                return self._ending(cut, limit) or Ending(session, wall_clock=limit)
            spec = next_spec

    def _unrecognised(self, result: AttemptResult) -> Ending:
        """A CLI that spoke only in lines its parser does not know: not retried (it would say
        the same), failed naming the CLI, its version and the first such line."""
        verdict = result.verdict
        assert verdict is not None
        self._incidents.record(
            verdict.scope, verdict.threshold, "fail", self.retry, self.pid, verdict=verdict
        )
        # An agent CLI keeps what it last answered to `--version`; other backends have none.
        version = str(getattr(self.backend, "version", ""))
        error = unrecognised_error(
            self.backend.name, version, verdict.unrecognised, verdict.describe()
        )
        return Ending(
            result.session_id, error=error, failure_reason=UNRECOGNISED_REASON, usage=result.usage
        )

    def _ending(self, result: AttemptResult, limit: float) -> Ending | None:
        """How the run ends after this attempt, or None when a watchdog verdict may retry."""
        session, final = result.session_id, result.final
        if self.stop_reason:
            return Ending(session, stopped=self.stop_reason, usage=result.usage)
        if result.interrupted:
            answered = final is not None and not final.is_error
            action = "completed" if answered else "fail"
            self._incidents.record("wall_clock", limit, action, self.retry, self.pid, result.tools)
            return Ending(session, wall_clock=limit, final=final, usage=result.usage)
        if result.spawn_error:
            return Ending(session, error=result.spawn_error)
        grace = self._services.settings.exit_grace
        if result.lingered is not None and grace > 0 and final is not None:
            action = "fail" if final.is_error else "completed"
            self._incidents.record(
                "exit_grace", grace, action, self.retry, self.pid, result.tools, result.lingered
            )
        return None
