"""The document `GET /health` serves: a plain dict built on the event loop from the worker.

Field names follow the Multica daemon's health endpoint (`status`, `pid`, `os`, `uptime`,
`daemon_id`, `device_name`, `server_url`, `cli_version`, `active_task_count`,
`running_task_count`, `agents`, `workspaces`) so tools written for it keep working; the rest
(`tasks`, `server_circuit`, `outbox_depth`, ...) is this daemon's own. It never holds the
daemon's token, a task's token or a prompt.
"""

from __future__ import annotations

import platform
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import daemon
from daemon.durations import format_duration

if TYPE_CHECKING:
    from daemon.task.run import TaskRun
    from daemon.worker import Worker

OS_NAME = platform.system().lower()


def task_view(runner: TaskRun) -> dict[str, Any]:
    """One running task as the health port shows it (no token, no prompt)."""
    scope, threshold = runner.watchdog.applicable() if runner.watchdog else ("", 0.0)
    idle = runner.activity.idle_seconds()
    return {
        "id": runner.task.id,
        "backend": runner.backend.name,
        "pid": runner.pid,
        "started_at": iso_time(runner.started_wall),
        "idle_seconds": round(idle, 1),
        "tools_in_flight": runner.activity.tools_view(),
        "threshold_seconds": threshold,
        "watchdog_scope": scope,
        "watchdog_fires_in_seconds": round(max(0.0, threshold - idle), 1) if threshold else None,
        "retry": runner.retry,
        "messages": runner.activity.messages,
    }


def health_document(worker: Worker | None, *, pid: int, started_wall: float) -> dict[str, Any]:
    """What the health port shows now; before the worker exists, a `starting` stub."""
    doc: dict[str, Any] = {
        "status": "starting",
        "pid": pid,
        "os": OS_NAME,
        "started_at": iso_time(started_wall),
        "cli_version": daemon.__version__,
        "version": daemon.__version__,
        "daemon_id": "",
        "device_name": "",
        "server_url": "",
        "registered": False,
        "active_task_count": 0,
        "running_task_count": 0,
        "max_concurrent_tasks": 0,
        "agents": [],
        "workspaces": [],
        "server_circuit": "closed",
        "outbox_depth": 0,
        "last_message_age_seconds": 0.0,
        "tasks": [],
    }
    if worker is None:
        return doc
    # A copy of the values: a runner that finishes mid-build must not change the dict.
    tasks = [task_view(runner) for runner in list(worker.runners.values())]
    idles = [float(t["idle_seconds"]) for t in tasks if isinstance(t["idle_seconds"], int | float)]
    doc.update(
        status=worker.status,
        daemon_id=worker.daemon_id,
        device_name=worker.settings.device_name,
        server_url=without_credentials(worker.server_url),
        registered=worker.registered,
        active_task_count=len(tasks),
        running_task_count=sum(1 for t in tasks if t["pid"] is not None),
        max_concurrent_tasks=worker.settings.max_concurrent_tasks,
        agents=[{"name": name, "version": v} for name, (_, v) in worker.backends.items()],
        workspaces=[dict(w) for w in worker.workspaces],
        server_circuit=worker.circuit.state,
        outbox_depth=worker.outbox.depth(),
        last_message_age_seconds=min(idles) if idles else 0.0,
        tasks=tasks,
    )
    return doc


def with_uptime(doc: dict[str, Any], uptime: float, snapshot_age: float) -> dict[str, Any]:
    """`doc` plus the uptime at answer time (Go duration text and seconds) and its age."""
    return {
        **doc,
        "uptime": format_duration(int(uptime)),
        "uptime_seconds": round(uptime, 1),
        "snapshot_age_seconds": round(snapshot_age, 3),
    }


def iso_time(wall: float) -> str:
    """UTC wall time as `2026-01-02T03:04:05Z`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


def without_credentials(url: str) -> str:
    """The URL without `user:password@`: a server URL may carry credentials, the port must not."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
