"""The incident log: one complete, parseable `timeouts.jsonl` line per watchdog or timeout event."""

from __future__ import annotations

import json
import logging
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.state.incidents import Incident, IncidentLog
from tests.e2e.timeout_support import SCOPES, fires, incidents, say
from tests.helpers import serving_daemon

FIELDS = {
    "time",
    "task_id",
    "scope",
    "threshold",
    "idle_seconds",
    "tools_in_flight",
    "last_message_type",
    "retry",
    "action",
    "pid",
    "backend",
}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

# One task per scope, all in one daemon; each stalls in the way its scope exists to catch.
# The wall clock is daemon-wide, so it must strike only the task made for it: it comes 5x the
# first-output window after the start (the latest of the other scopes, which each fire by
# 1.5 windows on a quiet machine), and its task talks for longer than the wall clock, 0.1 s
# sleep by sleep, so it can only end by it.
SCRIPTS = {
    "idle": {"steps": [say("thinking"), {"hang": True}]},
    "tool": {
        "steps": [
            say("running make"),
            {"emit": {"type": "tool_use", "tool": "Bash", "call_id": "b1", "input": {}}},
            {"hang": True},
        ]
    },
    "first_output": {"steps": [{"hang": True}]},
    "exit_grace": {"steps": [say("done"), {"result": {"output": "ok"}}, {"hang": True}]},
    "wall_clock": {"steps": [s for i in range(150) for s in (say(f"{i}"), {"sleep": 0.1})]},
}
THRESHOLDS = {"idle": 0.5, "tool": 1.0, "first_output": 2.0, "exit_grace": 0.5, "wall_clock": 10.0}
LAST_TYPE = {
    "idle": "text",
    "tool": "tool_use",
    "first_output": "",
    "exit_grace": "result",
    "wall_clock": "text",
}
ACTION = {
    "idle": "fail",
    "tool": "fail",
    "first_output": "fail",
    "exit_grace": "completed",
    "wall_clock": "fail",
}


@pytest.mark.anyio
async def test_every_scope_writes_one_complete_line(tmp_path: Path) -> None:
    """Idle, tool, first output, exit grace and wall clock: one full line and one count each."""
    async with serving_daemon(
        tmp_path,
        MULTICA_AGENT_IDLE_WATCHDOG="500ms",
        MULTICA_AGENT_TOOL_WATCHDOG="1s",
        MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="2s",
        MULTICA_AGENT_EXIT_GRACE="500ms",
        MULTICA_AGENT_TIMEOUT="10s",
    ) as d:
        ids = {scope: await d.submit(script) for scope, script in SCRIPTS.items()}
        for task_id in ids.values():
            await d.wait(task_id)
        raw = (d.settings.state_dir / "timeouts.jsonl").read_text().splitlines()
        assert fires(d) == dict.fromkeys(SCOPES, 1.0)
    rows = [json.loads(line) for line in raw]
    assert len(rows) == len(SCOPES)
    by_task = {row["task_id"]: row for row in rows}
    assert set(by_task) == set(ids.values())
    for scope, task_id in ids.items():
        row = by_task[task_id]
        assert set(row) == FIELDS, scope
        assert row["scope"] == scope
        assert row["threshold"] == THRESHOLDS[scope]
        assert row["idle_seconds"] >= (THRESHOLDS[scope] if scope != "wall_clock" else 0)
        assert row["last_message_type"] == LAST_TYPE[scope], scope
        assert row["action"] == ACTION[scope], scope
        assert row["retry"] == 0 and row["backend"] == "scripted"
        assert isinstance(row["pid"], int) and row["pid"] > 0
        assert TIME.match(row["time"])
        age = datetime.now(UTC) - datetime.strptime(row["time"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=UTC
        )
        assert age.total_seconds() < 120
        if scope == "tool":
            (tool,) = row["tools_in_flight"]
            assert tool["name"] == "Bash" and tool["call_id"] == "b1"
            assert tool["running_for"] >= 1.0
        else:
            assert row["tools_in_flight"] == [], scope
    assert len({row["pid"] for row in rows}) == len(rows)


@pytest.mark.anyio
async def test_wall_clock_line_names_the_tool_it_interrupted(tmp_path: Path) -> None:
    """A wall clock striking inside a tool call records that tool, though the attempt is gone."""
    script = {
        "steps": [{"emit": {"type": "tool_use", "tool": "Bash", "call_id": "m1"}}, {"hang": True}]
    }
    async with serving_daemon(tmp_path, MULTICA_AGENT_TIMEOUT="1s") as d:
        submitted = time.monotonic()
        task_id = await d.submit(script)
        task = await d.wait(task_id)
        lasted = time.monotonic() - submitted
        (row,) = incidents(d, task_id)
    assert task["failure_reason"] == "timeout"
    assert row["scope"] == "wall_clock"
    (tool,) = row["tools_in_flight"]
    assert tool["name"] == "Bash" and tool["call_id"] == "m1"
    # The tool began after the agent's spawn and ran until the cap struck, 1 s after the task
    # began: how much of that second the spawn took, and how late a loaded loop struck, depend
    # on the machine; that it ran within the task's life does not.
    assert 0 < tool["running_for"] <= lasted


def incident(**fields: object) -> Incident:
    values: dict[str, object] = {
        "task_id": "t-1",
        "scope": "idle",
        "threshold": 1800.0,
        "idle_seconds": 1800.123456,
        "last_message_type": "text",
        "retry": 0,
        "action": "fail",
        "pid": 42,
    }
    values.update(fields)
    return Incident(**values)  # type: ignore[arg-type]


def test_records_are_appended_one_line_each(tmp_path: Path) -> None:
    """Each record adds one line; earlier lines stay as they were; the directory is created."""
    log = IncidentLog(tmp_path / "state" / "timeouts.jsonl")
    log.record(incident(task_id="a"))
    first = log.path.read_text()
    log.record(incident(task_id="b", scope="tool", action="retry"))
    lines = log.path.read_text().splitlines()
    assert log.path.read_text().startswith(first)
    assert [json.loads(line)["task_id"] for line in lines] == ["a", "b"]
    row = json.loads(lines[0])
    assert row["idle_seconds"] == 1800.123
    assert TIME.match(row["time"])


def test_unwritable_log_is_reported_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state dir that cannot be written loses the line with an error log, never the run."""
    blocker = tmp_path / "state"
    blocker.write_text("not a directory")
    log = IncidentLog(blocker / "timeouts.jsonl")
    with caplog.at_level(logging.ERROR, logger="daemon.state.incidents"):
        log.record(incident())
    assert "could not append to" in caplog.text
    assert blocker.read_text() == "not a directory"
