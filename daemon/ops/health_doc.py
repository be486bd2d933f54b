"""The document `GET /health` serves: a plain dict built from the daemon's snapshot.

Field names and shapes follow the Multica daemon's health endpoint (`status`, `pid`, `os`,
`uptime`, `profile`, `daemon_id`, `device_name`, `server_url`, `cli_version`,
`active_task_count`, `running_task_count`, `resource_wait_task_count`, `agents` as provider
names, `workspaces` as `{id, runtimes}`) so tools written for it keep working; the rest
(`stage`, `version`, `agent_versions`, a workspace's `name`, `tasks`, `server_circuit`,
`outbox_depth`, ...) is this daemon's own, as is `provider_failures` (each backend's last).
It never holds the daemon's token, a task's token or a prompt. Without the daemon's token it is
served `without_ids`: tasks, workspaces and runtimes by handle (handles.py), since an id leads
to a work dir.

`status` is the word Multica's CLI and desktop app read: they count a daemon alive only while
it says `running` or `starting`. This daemon finishes its running tasks before it exits (up to
the shutdown grace); said as `stopping`, `multica daemon stop` printed "Daemon stopped." and
removed its pid file half a second in while the daemon and its agents ran on, and a `daemon
start` right after failed on the port. So while it stops, `status` stays `running` (or
`starting`, if it never registered) and Multica's CLI says the daemon is still stopping and may
be finishing a running task; `stage` says `stopping`. `cli_version` is the version the server
sees (`0.4.10 (agent-daemon 0.1.0)`, daemon/protocol/release.py), which `multica daemon
status` prints; `version` this daemon's own.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import asdict
from typing import Any

import daemon
from daemon.addresses import without_credentials
from daemon.ops.handles import runtime_handle, task_handle, workspace_handle
from daemon.protocol.release import cli_version
from daemon.snapshot import DaemonSnapshot, RunSnapshot
from daemon.times import format_duration, utc_iso

OS_NAME = platform.system().lower()
CLI_VERSION = cli_version()


def multica_status(stage: str, registered: bool) -> str:
    """What `status` says for the worker's `stage`: `starting` or `running`, the words Multica's
    CLI counts a daemon alive by; a daemon stopping is alive until it exits."""
    if stage == "stopping":
        return "running" if registered else "starting"
    return stage


@functools.lru_cache(maxsize=4096)
def _started_at(wall: float) -> str:
    """A task's start as the health port shows it; the same for every tick of its run."""
    return utc_iso(wall)


def task_view(run: RunSnapshot) -> dict[str, Any]:
    """One running task as the health port shows it (no token, no prompt)."""
    activity, watchdog = run.activity, run.attempt.watchdog
    threshold, idle = watchdog.threshold_seconds, activity.idle_seconds
    return {
        "id": run.id,
        "backend": run.backend,
        "pid": run.attempt.pid,
        "started_at": _started_at(run.started_wall),
        "idle_seconds": round(idle, 1),
        "tools_in_flight": [
            {"name": t.name, "call_id": t.call_id, "running_for": t.running_for}
            for t in activity.tools_in_flight
        ],
        "threshold_seconds": threshold,
        "watchdog_scope": watchdog.scope,
        "watchdog_fires_in_seconds": round(max(0.0, threshold - idle), 1) if threshold else None,
        "retry": run.retry,
        "messages": activity.messages,
    }


def health_document(
    snapshot: DaemonSnapshot | None, *, pid: int, started_wall: float
) -> dict[str, Any]:
    """What the health port shows now; before the worker exists, a `starting` stub."""
    doc: dict[str, Any] = {
        "status": "starting",
        "stage": "starting",
        "pid": pid,
        "os": OS_NAME,
        "started_at": utc_iso(started_wall),
        "cli_version": CLI_VERSION,
        "version": daemon.__version__,
        "profile": "",
        "daemon_id": "",
        "device_name": "",
        "server_url": "",
        "registered": False,
        "active_task_count": 0,
        "running_task_count": 0,
        # Tasks parked waiting for a local resource (Multica's local directories): none here.
        "resource_wait_task_count": 0,
        "max_concurrent_tasks": 0,
        "agents": [],
        "agent_versions": {},
        "workspaces": [],
        "server_circuit": "closed",
        "outbox_depth": 0,
        "last_message_age_seconds": 0.0,
        "tasks": [],
        "disk": None,
        "provider_failures": [],
        "agents_as_root": False,
        "containment": "",
        "agent_users_held_back": [],
    }
    if snapshot is None:
        return doc
    runs = snapshot.runs
    quietest = min(round(run.activity.idle_seconds, 1) for run in runs) if runs else 0.0
    doc.update(
        status=multica_status(snapshot.status, snapshot.registered),
        stage=snapshot.status,
        profile=snapshot.profile,
        daemon_id=snapshot.daemon_id,
        device_name=snapshot.device_name,
        server_url=without_credentials(snapshot.server_url),
        registered=snapshot.registered,
        active_task_count=len(runs),
        running_task_count=sum(1 for run in runs if run.attempt.pid is not None),
        max_concurrent_tasks=snapshot.max_concurrent_tasks,
        agents=[name for name, _ in snapshot.agents],
        agent_versions=dict(snapshot.agents),
        workspaces=[
            {"id": wid, "name": name, "runtimes": list(runtimes)}
            for wid, name, runtimes in snapshot.workspaces
        ],
        server_circuit=snapshot.server_circuit,
        outbox_depth=snapshot.outbox_depth,
        last_message_age_seconds=quietest,
        tasks=[task_view(run) for run in runs],
        disk=asdict(snapshot.disk) if snapshot.disk else None,
        provider_failures=[
            {"backend": f.backend, "reason": f.reason, "at": f.at, "resets": f.resets}
            for f in snapshot.provider_failures
        ],
        agents_as_root=snapshot.agents_as_root,
        containment=snapshot.containment,
        agent_users_held_back=list(snapshot.held_back_users),
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


def without_ids(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` as it is shown without the daemon's token: each task, workspace and runtime
    named by its handle, nothing else changed."""
    return {
        **doc,
        "tasks": [{**task, "id": task_handle(task["id"])} for task in doc["tasks"]],
        "workspaces": [
            {
                **workspace,
                "id": workspace_handle(workspace["id"]),
                "runtimes": [runtime_handle(r) for r in workspace["runtimes"]],
            }
            for workspace in doc["workspaces"]
        ],
    }
