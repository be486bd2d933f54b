"""The status page's JSON (`GET /page.json`): the published snapshot as the page draws it.

It shows what `/health` shows, less: tasks go by their handle (`daemon.ops.handles`),
never by id; no prompt, no token, no error text (it may name paths), no work directory, no
workspace, no tool input, no pid of an agent. Times the snapshot holds as "seconds so far" are
moved forward by the snapshot's age, so a countdown is right at the moment of the answer.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import daemon
from daemon.addresses import without_credentials
from daemon.ops.handles import task_handle
from daemon.ops.samples import Sample
from daemon.snapshot import DaemonSnapshot, FinishedSnapshot, RunSnapshot


def page_document(
    snapshot: DaemonSnapshot | None,
    *,
    age: float,
    now_wall: float,
    pid: int,
    started_wall: float,
    series: tuple[Sample, ...],
) -> dict[str, Any]:
    """The page's view of `snapshot`, taken `age` seconds before `now_wall`."""
    doc: dict[str, Any] = {
        "version": daemon.__version__,
        "pid": pid,
        "uptime_seconds": round(now_wall - started_wall, 1),
        "snapshot_age_seconds": round(age, 3),
        "status": "starting",
        "server": "",
        "circuit": "closed",
        "outbox_depth": 0,
        "slots": {"used": 0, "total": 0},
        "agents": [],
        "provider_failures": [],
        "disk": None,
        "running": [],
        "finished": [],
        "chart": _chart(series),
    }
    if snapshot is None:
        return doc
    doc.update(
        status=snapshot.status,
        server=without_credentials(snapshot.server_url),
        circuit=snapshot.server_circuit,
        outbox_depth=snapshot.outbox_depth,
        slots={"used": len(snapshot.runs), "total": snapshot.max_concurrent_tasks},
        agents=[{"name": name, "version": version} for name, version in snapshot.agents],
        provider_failures=[
            {"backend": f.backend, "reason": f.reason, "at": f.at, "resets": f.resets}
            for f in snapshot.provider_failures
        ],
        disk=asdict(snapshot.disk) if snapshot.disk else None,
        running=[_running(run, age, now_wall) for run in snapshot.runs],
        finished=[_finished(task, now_wall) for task in reversed(snapshot.finished)],
    )
    return doc


def _running(run: RunSnapshot, age: float, now_wall: float) -> dict[str, Any]:
    """One running task: its state, its tools, and how far its watchdog is from firing."""
    watchdog = run.attempt.watchdog
    idle = run.activity.idle_seconds + age
    threshold = watchdog.threshold_seconds
    # Between attempts no agent runs: nothing can fire until the next one starts.
    live = threshold > 0 and run.state != "retrying"
    return {
        "label": task_handle(run.id),
        "backend": run.backend,
        "age_seconds": round(max(0.0, now_wall - run.started_wall), 1),
        "state": run.state,
        "tools": [
            {"name": t.name, "running_seconds": round(t.running_for + age, 1)}
            for t in run.activity.tools_in_flight
        ],
        "idle_seconds": round(idle, 1),
        "window": watchdog.scope if live else "",
        "window_seconds": threshold if live else 0,
        "fires_in_seconds": round(max(0.0, threshold - idle), 1) if live else None,
        "attempts": run.retry + 1,
        "resumes": run.resumes,
        "messages": run.activity.messages,
        "transcript_lag_seconds": round(run.transcript_lag, 3),
    }


def _finished(task: FinishedSnapshot, now_wall: float) -> dict[str, Any]:
    """One ended task: how, why, how long, what it spent."""
    return {
        "label": task_handle(task.id),
        "backend": task.backend,
        "outcome": task.status,
        "reason": task.reason,
        "duration_seconds": round(max(0.0, task.ended_wall - task.started_wall), 1),
        "ended_seconds_ago": round(max(0.0, now_wall - task.ended_wall), 1),
        "attempts": task.attempts,
        "resumes": task.resumes,
        "usage": {
            "input_tokens": task.input_tokens,
            "output_tokens": task.output_tokens,
            "cache_read_tokens": task.cache_read_tokens,
            "cache_write_tokens": task.cache_write_tokens,
        },
    }


def _chart(series: tuple[Sample, ...]) -> dict[str, Any]:
    """The samples as two columns, oldest first, and the seconds they span."""
    return {
        "span_seconds": round(series[-1].at - series[0].at, 1) if series else 0.0,
        "cpu_percent": [s.cpu_percent for s in series],
        "lag_seconds": [s.lag_seconds for s in series],
    }
