"""The incident log: one JSON line per watchdog or timeout event in `timeouts.jsonl`.

A line (keys sorted) looks like

    {"action": "retry", "backend": "claude", "idle_seconds": 1800.2,
     "last_message_type": "text", "pid": 4242, "retry": 0, "scope": "idle",
     "task_id": "...", "threshold": 1800.0, "time": "2025-01-01T12:00:00Z",
     "tools_in_flight": [{"call_id": "c1", "name": "Bash", "running_for": 7200.4}]}

`scope` is the budget that ran out: `idle`, `tool`, `first_output` (each a watchdog kill),
`unrecognised` (the first-output budget passed with only lines the parser did not know),
`exit_grace` (the agent sent its final result but did not exit) or `wall_clock`
(`MULTICA_AGENT_TIMEOUT`) — or where the daemon itself failed the task: `prepare` (its work
directory or instructions file could not be made) or `internal` (any other error while
preparing or running it); those lines also carry the `error`, and a threshold of 0.
`idle_seconds` is the silence when it fired — for `exit_grace`, the time since the final
result. `retry` counts the retries made before this event.
`action` is what followed: `retry` (the run is started again), `fail` (the task is
reported failed), or `completed` (an agent killed after its final result: the result it
sent stands and the task is reported completed).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

from daemon.files.private import append_line, ensure_dir
from daemon.times import utc_iso

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Incident:
    """What an operator needs after a run was stopped (or nudged) by a watchdog or timeout."""

    task_id: str
    scope: str
    threshold: float
    idle_seconds: float
    last_message_type: str
    retry: int
    action: str
    pid: int | None
    tools_in_flight: list[dict[str, object]] = field(default_factory=list)
    backend: str = ""
    time: str = ""
    error: str = ""


class IncidentLog:
    """Appends incidents to `<state dir>/timeouts.jsonl`; a write failure is logged, not raised."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, incident: Incident) -> None:
        """Append one line (the record gets the current UTC time)."""
        row = asdict(incident)
        row["time"] = utc_iso()
        row["idle_seconds"] = round(incident.idle_seconds, 3)
        if not incident.error:  # only the daemon's own failures carry one
            del row["error"]
        try:
            ensure_dir(self.path.parent)
            append_line(self.path, json.dumps(row, sort_keys=True))
        except OSError as exc:
            log.error("could not append to %s: %s", self.path, exc)
