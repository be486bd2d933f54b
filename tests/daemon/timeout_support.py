"""What the timeout, incident and retry tests read back: incident lines, fire counts, survivors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from backends.process import TRACKING_ENV
from backends.proctree import tagged
from tests.helpers import RunningDaemon

SCOPES = ("idle", "tool", "first_output", "exit_grace", "wall_clock")
"""Every scope a watchdog or timeout event is recorded and counted under."""


def incidents(d: RunningDaemon, task_id: str | None = None) -> list[dict[str, Any]]:
    """The parsed lines of the daemon's timeouts.jsonl (only this task's, if given)."""
    path = d.settings.state_dir / "timeouts.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if task_id is None or r["task_id"] == task_id]


def fires(d: RunningDaemon) -> dict[str, float]:
    """`agent_daemon_watchdog_fires_total` per scope, only the scopes that fired."""
    counts = {}
    for scope in SCOPES:
        value = d.metrics.registry.get_sample_value(
            "agent_daemon_watchdog_fires_total", {"scope": scope}
        )
        if value:
            counts[scope] = value
    return counts


def survivors(task_id: str) -> list[int]:
    """Pids of live processes still carrying the task's tracking tag."""
    return [p.pid for p in tagged(TRACKING_ENV, task_id)]


def say(text: str) -> dict[str, Any]:
    """A scripted step that prints one text message."""
    return {"emit": {"type": "text", "content": text}}


def command_agent(path: Path, code: str) -> dict[str, str]:
    """Daemon env overrides that run `code`, written to `path`, as the `command` agent."""
    path.write_text(code)
    return {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(path)}
