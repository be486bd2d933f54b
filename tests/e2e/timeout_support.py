"""What the timeout, incident and retry tests read back: incidents, fire counts, processes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from daemon.testing import task_processes
from tests.helpers import RunningDaemon, incidents

SCOPES = ("idle", "tool", "first_output", "exit_grace", "wall_clock")
"""Every scope a watchdog or timeout event is recorded and counted under."""


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


def say(text: str) -> dict[str, Any]:
    """A scripted step that prints one text message."""
    return {"emit": {"type": "text", "content": text}}


def command_agent(path: Path, code: str) -> dict[str, str]:
    """Daemon env overrides that run `code`, written to `path`, as the `command` agent."""
    path.write_text(code)
    return {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(path)}


__all__ = ["SCOPES", "command_agent", "fires", "incidents", "say", "task_processes"]
