"""The worker's published snapshot: the one place that reads the worker and its runs for ops.

Operations (the health port, its document, systemd's status line) get the frozen values of
daemon/snapshot.py and import nothing from here, the worker or the task core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from daemon.snapshot import DaemonSnapshot, RunSnapshot, ToolSnapshot

if TYPE_CHECKING:
    from daemon.task.run import TaskRun
    from daemon.worker import Worker


def worker_snapshot(worker: Worker) -> DaemonSnapshot:
    """The daemon and its running tasks now, as plain values."""
    return DaemonSnapshot(
        status=worker.status,
        daemon_id=worker.daemon_id,
        device_name=worker.settings.device_name,
        server_url=worker.server_url,
        registered=worker.registered,
        max_concurrent_tasks=worker.settings.max_concurrent_tasks,
        agents=tuple((name, version) for name, (_, version) in worker.backends.items()),
        workspaces=tuple(
            (w["id"], w["name"], tuple(r.id for r in worker.registration.by_workspace[w["id"]]))
            for w in worker.workspaces
        ),
        profile=worker.settings.profile,
        server_circuit=worker.circuit.state,
        outbox_depth=worker.outbox.depth(),
        # A copy of the values: a runner that finishes mid-build must not change the tuple.
        runs=tuple(run_snapshot(runner) for runner in list(worker.runners.values())),
        disk=worker.gc.disk,
    )


def run_snapshot(runner: TaskRun) -> RunSnapshot:
    """One running task as plain values: the only place that reads a runner for operations."""
    activity = runner.activity
    scope, threshold = runner.watchdog.applicable() if runner.watchdog else ("", 0.0)
    now = activity.clock()
    tools = tuple(
        ToolSnapshot(t.name, t.call_id, round(now - t.started_at, 3))
        for t in list(activity.tools.values())
    )
    return RunSnapshot(
        id=runner.task.id,
        backend=runner.backend.name,
        pid=runner.pid,
        started_wall=runner.started_wall,
        idle_seconds=activity.idle_seconds(),
        tools_in_flight=tools,
        watchdog_scope=scope,
        threshold_seconds=threshold,
        retry=runner.retry,
        messages=activity.messages,
    )
