"""The timeout family on real agent processes: each scope fires for its case, not its neighbours'.

Windows are a second or less; the upper bounds leave seconds of slack for a loaded 2-core
machine, and the lower bounds are what the windows guarantee.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.timeout_support import command_agent, fires, incidents, say, task_processes
from tests.helpers import RunningDaemon, serving_daemon

pytestmark = pytest.mark.anyio


async def timed(
    d: RunningDaemon, script: dict[str, Any] | str, backend: str = "scripted"
) -> tuple[str, dict[str, Any], float]:
    """Submit, wait for the end; returns (task id, task, seconds from submit to the end)."""
    begun = time.monotonic()
    task_id = await d.submit(script, backend=backend)
    task = await d.wait(task_id)
    return task_id, task, time.monotonic() - begun


# -- first output ---------------------------------------------------------------------------------


async def test_silent_start_is_stopped_by_the_first_output_budget(tmp_path: Path) -> None:
    """No message at all: stopped after the first-output budget, not the shorter idle window."""
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="300ms", MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="1200ms"
    ) as d:
        task_id, task, took = await timed(d, {"steps": [{"hang": True}]})
        assert fires(d) == {"first_output": 1}
        (incident,) = incidents(d, task_id)
    assert task["status"] == "failed"
    assert task["failure_reason"] == "idle_watchdog"
    assert "no first output within 1.2s" in task["error"]
    assert 1.2 <= took <= 1.2 + 0.6 + 3.0
    assert incident["scope"] == "first_output" and incident["action"] == "fail"
    assert incident["threshold"] == 1.2 and incident["idle_seconds"] >= 1.2
    assert incident["last_message_type"] == ""
    assert task_processes(task_id) == []


async def test_slow_token_after_first_output_is_not_a_first_output_timeout(tmp_path: Path) -> None:
    """Once output started, silence longer than the first-output budget is left alone."""
    script = {"steps": [say("starting"), {"sleep": 1.6}, {"result": {"output": "done"}}]}
    async with serving_daemon(tmp_path, MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="1s") as d:
        _, task, _ = await timed(d, script)
        assert fires(d) == {}
        assert incidents(d) == []
    assert task["status"] == "completed", task
    assert task["output"] == "done"


async def test_first_output_off_leaves_a_silent_start_to_the_idle_window(tmp_path: Path) -> None:
    """`MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT=0`: a silent start is judged by the idle window."""
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="500ms", MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="0"
    ) as d:
        task_id, task, _ = await timed(d, {"steps": [{"hang": True}]})
        assert fires(d) == {"idle": 1}
        assert [i["scope"] for i in incidents(d, task_id)] == ["idle"]
    assert task["failure_reason"] == "idle_watchdog"
    assert "idle watchdog window 500ms" in task["error"]


# -- tool window ----------------------------------------------------------------------------------


async def test_wedged_tool_call_is_stopped_by_the_tool_window(tmp_path: Path) -> None:
    """A tool call that never returns is stopped by the tool window, named in the error."""
    script = {
        "steps": [
            say("running it"),
            {"emit": {"type": "tool_use", "tool": "Bash", "call_id": "t1", "input": {}}},
            {"hang": True},
        ]
    }
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="300ms", MULTICA_AGENT_TOOL_WATCHDOG="1200ms"
    ) as d:
        task_id, task, took = await timed(d, script)
        assert fires(d) == {"tool": 1}
        (incident,) = incidents(d, task_id)
        assert d.metrics.registry.get_sample_value("agent_daemon_tools_in_flight") == 0
    assert task["failure_reason"] == "idle_watchdog"
    assert "inside tool call Bash (t1): tool watchdog window 1.2s exceeded" in task["error"]
    assert 1.2 <= took <= 1.2 + 0.6 + 3.0
    assert incident["scope"] == "tool" and incident["threshold"] == 1.2
    (tool,) = incident["tools_in_flight"]
    assert tool["name"] == "Bash" and tool["call_id"] == "t1" and tool["running_for"] >= 1.2
    assert incident["last_message_type"] == "tool_use"
    assert task_processes(task_id) == []


async def test_busy_tool_call_outlasts_the_idle_window(tmp_path: Path) -> None:
    """A tool call silent for 4× the idle window but within the tool window completes."""
    script = {
        "steps": [
            {"tool": {"name": "Bash", "call_id": "t1", "seconds": 1.2, "output": "ok"}},
            {"result": {"output": "built"}},
        ]
    }
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="300ms", MULTICA_AGENT_TOOL_WATCHDOG="3s"
    ) as d:
        _, task, _ = await timed(d, script)
        assert fires(d) == {}
    assert task["status"] == "completed", task
    assert task["output"] == "built"


# -- exit grace -----------------------------------------------------------------------------------


def lingering_agent(tmp_path: Path, result: dict[str, str]) -> dict[str, str]:
    """A `command` agent that prints its result, closes stdout and stays alive for a minute."""
    line = json.dumps({"type": "result", **result})
    return command_agent(
        tmp_path / "agent.py",
        "import os, sys, time\n"
        "sys.stdin.read()\n"
        f"print({line!r}, flush=True)\n"
        "os.close(1)\n"
        "time.sleep(60)\n",
    )


async def test_agent_that_keeps_stdout_open_after_its_result_completes(tmp_path: Path) -> None:
    """Result sent, stdout left open: killed after the exit grace; the run counts as completed."""
    script = {"steps": [say("done soon"), {"result": {"output": "the answer"}}, {"hang": True}]}
    async with serving_daemon(tmp_path, MULTICA_AGENT_EXIT_GRACE="1s") as d:
        task_id, task, _ = await timed(d, script)
        assert fires(d) == {"exit_grace": 1}
        (incident,) = incidents(d, task_id)
    assert task["status"] == "completed", task
    assert task["output"] == "the answer"
    assert incident["scope"] == "exit_grace" and incident["action"] == "completed"
    # Killed after the grace, not held longer (the process helper alone would wait 5 s).
    assert 1.0 <= incident["idle_seconds"] <= 3.0
    assert incident["last_message_type"] == "result"
    assert task_processes(task_id) == []


async def test_agent_that_closes_stdout_but_lingers_after_its_result_completes(
    tmp_path: Path,
) -> None:
    """Result sent, stdout closed, process alive: killed after the grace, still completed."""
    agent = lingering_agent(tmp_path, {"output": "the answer", "session_id": "s-9"})
    async with serving_daemon(tmp_path, MULTICA_AGENT_EXIT_GRACE="1s", **agent) as d:
        task_id, task, _ = await timed(d, "go", backend="command")
        assert fires(d) == {"exit_grace": 1}
        (incident,) = incidents(d, task_id)
    assert task["status"] == "completed", task
    assert task["output"] == "the answer" and task["session_id"] == "s-9"
    assert incident["scope"] == "exit_grace" and incident["action"] == "completed"
    assert 1.0 <= incident["idle_seconds"] <= 3.0
    assert task_processes(task_id) == []


async def test_grace_longer_than_the_default_exit_wait_is_honoured_after_stdout_closed(
    tmp_path: Path,
) -> None:
    """A 6 s grace outlasts the 5 s default exit wait: the agent gets all of it, then completes."""
    agent = lingering_agent(tmp_path, {"output": "the answer"})
    async with serving_daemon(tmp_path, MULTICA_AGENT_EXIT_GRACE="6s", **agent) as d:
        task_id, task, _ = await timed(d, "go", backend="command")
        (incident,) = incidents(d, task_id)
    assert task["status"] == "completed", task
    assert task["output"] == "the answer"
    assert incident["scope"] == "exit_grace" and incident["threshold"] == 6.0
    # Held for the whole grace (not cut at the 5 s default wait), and not much longer.
    assert 5.8 <= incident["idle_seconds"] <= 8.0
    assert task_processes(task_id) == []


async def test_failed_result_then_linger_is_still_failed(tmp_path: Path) -> None:
    """A final result that reports an error stays failed when the agent must be killed."""
    script = {"steps": [{"result": {"error": "quota exhausted"}}, {"hang": True}]}
    async with serving_daemon(tmp_path, MULTICA_AGENT_EXIT_GRACE="500ms") as d:
        task_id, task, _ = await timed(d, script)
        (incident,) = incidents(d, task_id)
    assert task["status"] == "failed"
    # Named by the daemon from the error text, as the server would have.
    assert task["failure_reason"] == "agent_error.provider_quota_limit"
    assert "quota exhausted" in task["error"]
    assert incident["scope"] == "exit_grace" and incident["action"] == "fail"


async def test_agent_that_exits_within_the_grace_is_not_killed(tmp_path: Path) -> None:
    """Exiting 300 ms after the result, inside a 2 s grace: completed, no exit-grace event."""
    script = {"steps": [{"result": {"output": "bye"}}, {"sleep": 0.3}, {"exit": 0}]}
    async with serving_daemon(tmp_path, MULTICA_AGENT_EXIT_GRACE="2s") as d:
        _, task, took = await timed(d, script)
        assert fires(d) == {}
        assert incidents(d) == []
        kills = d.metrics.registry.get_sample_value(
            "agent_daemon_process_kills_total", {"signal": "SIGKILL"}
        )
    assert task["status"] == "completed" and task["output"] == "bye"
    assert took < 2.0 + 3.0
    assert not kills


# -- wall clock -----------------------------------------------------------------------------------


async def test_busy_agent_is_stopped_by_the_wall_clock(tmp_path: Path) -> None:
    """An agent talking every 100 ms never trips the idle window but hits the wall clock."""
    chatter = [step for i in range(60) for step in (say(f"step {i}"), {"sleep": 0.1})]
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="500ms", MULTICA_AGENT_TIMEOUT="1500ms"
    ) as d:
        task_id, task, took = await timed(d, {"steps": chatter})
        assert fires(d) == {"wall_clock": 1}
        (incident,) = incidents(d, task_id)
    assert task["status"] == "failed"
    assert task["failure_reason"] == "timeout"
    assert "wall-clock limit of 1.5s" in task["error"]
    assert 1.5 <= took <= 1.5 + 3.0
    assert incident["scope"] == "wall_clock" and incident["action"] == "fail"
    assert incident["threshold"] == 1.5 and incident["last_message_type"] == "text"
    assert task_processes(task_id) == []


async def test_task_within_the_wall_clock_completes(tmp_path: Path) -> None:
    """A task that ends before the wall clock is untouched by it."""
    script = {"steps": [say("quick"), {"sleep": 0.3}, {"result": {"output": "in time"}}]}
    async with serving_daemon(tmp_path, MULTICA_AGENT_TIMEOUT="3s") as d:
        _, task, _ = await timed(d, script)
        assert fires(d) == {}
    assert task["status"] == "completed" and task["output"] == "in time"


async def test_wall_clock_during_a_lingering_exit_keeps_the_result(tmp_path: Path) -> None:
    """With the exit grace off, the wall clock ends a lingering agent and its result stands."""
    script = {"steps": [{"result": {"output": "kept"}}, {"hang": True}]}
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_EXIT_GRACE="0", MULTICA_AGENT_TIMEOUT="1s"
    ) as d:
        task_id, task, _ = await timed(d, script)
        assert fires(d) == {"wall_clock": 1}
        (incident,) = incidents(d, task_id)
    assert task["status"] == "completed", task
    assert task["output"] == "kept"
    assert incident["scope"] == "wall_clock" and incident["action"] == "completed"
