"""One task's incidents: its watchdog, timeout and failure lines in the incident log, filled in
with what the task and its activity already know (daemon/state/incidents.py has the format)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter

from daemon.state.incidents import Incident, IncidentLog
from daemon.task.activity import Activity
from daemon.task.watchdog import Verdict


class TaskIncidents:
    """Writes one task's incidents, filling in what the task and its activity already know."""

    def __init__(
        self, log: IncidentLog, task_id: str, backend: str, activity: Activity, fires: Counter
    ) -> None:
        self._log = log
        self._task_id = task_id
        self._backend = backend
        self._activity = activity
        self._fires = fires

    def failed(self, scope: str, error: str, retry: int, pid: int | None) -> None:
        """One line for a task the daemon itself failed (`prepare`, `internal`); no watchdog
        fired, so nothing is counted."""
        activity = self._activity
        self._log.record(
            Incident(
                task_id=self._task_id,
                scope=scope,
                threshold=0.0,
                idle_seconds=activity.idle_seconds(),
                last_message_type=activity.last_type,
                retry=retry,
                action="fail",
                pid=pid,
                backend=self._backend,
                error=error,
            )
        )

    def record(
        self,
        scope: str,
        threshold: float,
        action: str,
        retry: int,
        pid: int | None,
        tools: Sequence[dict[str, object]] = (),
        idle: float | None = None,
        *,
        verdict: Verdict | None = None,
    ) -> None:
        """One line in timeouts.jsonl; a watchdog verdict was already counted when it fired."""
        if verdict is None:
            self._fires.labels(scope).inc()
        else:
            idle, tools = verdict.idle_seconds, verdict.tools
        activity = self._activity
        self._log.record(
            Incident(
                task_id=self._task_id,
                scope=scope,
                threshold=threshold,
                idle_seconds=activity.idle_seconds() if idle is None else idle,
                last_message_type=activity.last_type,
                retry=retry,
                action=action,
                pid=pid,
                tools_in_flight=list(tools),
                backend=self._backend,
            )
        )
