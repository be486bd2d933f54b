"""Recovery after a watchdog kill (`MULTICA_AGENT_IDLE_RETRIES`), on real agent processes.

Resume when the backend gave a session id, start fresh only when no tool call ran, fail at once
otherwise; retries are bounded, wait 0 s, 5 s, 15 s, and stay under the wall clock and the
server's cancel. Backoff delays go through the worker's `services.idle_retry`, so the documented
5 s and 15 s are checked without being waited for.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from daemon.task.recovery import RESUME_PROMPT, RETRY_BACKOFF
from tests.e2e.timeout_support import command_agent, fires, incidents, say, task_processes
from tests.helpers import RunningDaemon, eventually, serving_daemon

pytestmark = pytest.mark.anyio

HANG = {"steps": [{"hang": True}]}


def record_backoff(d: RunningDaemon) -> list[float]:
    """Make the daemon's retry backoff instant; returns the list of delays it asked for."""
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        await anyio.lowlevel.checkpoint()

    retry = replace(d.worker.services.idle_retry, sleep=sleep)
    d.worker.services = replace(d.worker.services, idle_retry=retry)
    return delays


async def test_stalled_run_with_a_session_is_resumed(tmp_path: Path) -> None:
    """After an idle kill the run resumes its session with the short "continue" prompt."""
    script = {
        "steps": [{"emit": {"type": "status", "session_id": "sess-1"}}, say("hm"), {"hang": True}]
    }
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="500ms", MULTICA_AGENT_IDLE_RETRIES="1"
    ) as d:
        delays = record_backoff(d)
        task_id = await d.submit(script)
        task = await d.wait(task_id)
        lines = incidents(d, task_id)
        assert fires(d) == {"idle": 1}
        texts = [m["content"] for m in await d.api.messages(task_id) if m["type"] == "text"]
    assert task["status"] == "completed", task
    # The scripted agent echoes a resumed run's prompt with the session it was given.
    assert task["output"] == RESUME_PROMPT
    assert task["session_id"] == "sess-1"
    assert texts == ["hm", RESUME_PROMPT]
    assert [(i["scope"], i["action"], i["retry"]) for i in lines] == [("idle", "retry", 0)]
    assert delays == [0.0]
    assert task_processes(task_id) == []


async def test_stalled_run_without_session_or_tools_starts_fresh(tmp_path: Path) -> None:
    """No session and no tool call yet: the same prompt is run again from the start."""
    agent = command_agent(
        tmp_path / "agent.py",
        "import json, os, sys, time\n"
        "prompt = sys.stdin.read()\n"
        "if not os.path.exists('tried'):\n"
        "    open('tried', 'w').close()\n"
        "    time.sleep(60)\n"
        "print(json.dumps({'type': 'result', 'output': 'fresh: ' + prompt}), flush=True)\n",
    )
    async with serving_daemon(
        tmp_path,
        MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="800ms",
        MULTICA_AGENT_IDLE_RETRIES="2",
        **agent,
    ) as d:
        delays = record_backoff(d)
        task_id = await d.submit("build the thing", backend="command")
        task = await d.wait(task_id)
        lines = incidents(d, task_id)
        assert fires(d) == {"first_output": 1}
    assert task["status"] == "completed", task
    assert task["output"] == "fresh: build the thing"
    assert [(i["scope"], i["action"], i["retry"]) for i in lines] == [("first_output", "retry", 0)]
    assert delays == [0.0]


async def test_stalled_run_after_tool_calls_without_session_fails_at_once(tmp_path: Path) -> None:
    """Tools ran and there is no session: not retried, whatever the retry budget."""
    script = {
        "steps": [
            {"tool": {"name": "Write", "call_id": "w1", "input": {"path": "a.txt"}}},
            {"hang": True},
        ]
    }
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="500ms", MULTICA_AGENT_IDLE_RETRIES="3"
    ) as d:
        delays = record_backoff(d)
        task_id = await d.submit(script)
        task = await d.wait(task_id)
        lines = incidents(d, task_id)
        assert fires(d) == {"idle": 1}
    assert task["status"] == "failed"
    assert task["failure_reason"] == "idle_watchdog"
    assert "idle watchdog window 500ms exceeded" in task["error"]
    assert "not retried: tool calls ran and there is no session to resume" in task["error"]
    assert [(i["scope"], i["action"], i["retry"]) for i in lines] == [("idle", "fail", 0)]
    assert delays == []
    assert task_processes(task_id) == []


async def test_retries_are_bounded_and_back_off_0_5_15_seconds(tmp_path: Path) -> None:
    """Four retries: five real attempts, then failed; the waits are 0 s, 5 s, 15 s, 15 s."""
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="300ms", MULTICA_AGENT_IDLE_RETRIES="4"
    ) as d:
        assert d.worker.services.idle_retry.delays == RETRY_BACKOFF == (0.0, 5.0, 15.0)
        delays = record_backoff(d)
        task_id = await d.submit(HANG)
        task = await d.wait(task_id)
        lines = incidents(d, task_id)
        assert fires(d) == {"first_output": 5}
    assert task["status"] == "failed"
    assert task["failure_reason"] == "idle_watchdog"
    assert "no first output within 300ms" in task["error"]
    assert [(i["action"], i["retry"]) for i in lines] == [
        ("retry", 0),
        ("retry", 1),
        ("retry", 2),
        ("retry", 3),
        ("fail", 4),
    ]
    assert len({i["pid"] for i in lines}) == 5  # a new process for every attempt
    assert delays == [0.0, 5.0, 15.0, 15.0]
    assert task_processes(task_id) == []


async def test_wall_clock_covers_every_retry(tmp_path: Path) -> None:
    """A task that stalls on every attempt ends as `timeout` at the wall clock, retries or not."""
    async with serving_daemon(
        tmp_path,
        MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="300ms",
        MULTICA_AGENT_IDLE_RETRIES="50",
        MULTICA_AGENT_TIMEOUT="2s",
    ) as d:
        retry = replace(d.worker.services.idle_retry, delays=(0.0, 0.2))
        d.worker.services = replace(d.worker.services, idle_retry=retry)
        begun = time.monotonic()
        task_id = await d.submit(HANG)
        task = await d.wait(task_id)
        took = time.monotonic() - begun
        lines = incidents(d, task_id)
        counted = fires(d)
    assert task["status"] == "failed"
    assert task["failure_reason"] == "timeout"
    assert "wall-clock limit of 2s" in task["error"]
    assert 2.0 <= took <= 2.0 + 3.0
    *retried, last = lines
    assert retried and all(i["scope"] == "first_output" for i in retried)
    assert all(i["action"] == "retry" for i in retried)
    assert (last["scope"], last["action"]) == ("wall_clock", "fail")
    assert counted == {"first_output": len(retried), "wall_clock": 1}
    assert task_processes(task_id) == []


BACKOFF = 30.0


async def test_server_cancel_during_the_backoff_ends_the_task(tmp_path: Path) -> None:
    """A cancel from the server while waiting to retry ends the task; the cancel is acked."""
    async with serving_daemon(
        tmp_path, MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="300ms", MULTICA_AGENT_IDLE_RETRIES="1"
    ) as d:
        retry = replace(d.worker.services.idle_retry, delays=(BACKOFF,))
        d.worker.services = replace(d.worker.services, idle_retry=retry)
        task_id = await d.submit(HANG)
        await eventually(lambda: bool(incidents(d, task_id)))
        begun = time.monotonic()
        await d.api.cancel(task_id)

        async def acked() -> bool:
            return bool((await d.api.get_task(task_id))["cancel_acked"])

        await eventually(acked, within=10)
        await eventually(lambda: not d.worker.runs)  # the run left its 30 s backoff
        took = time.monotonic() - begun
        task = await d.api.get_task(task_id)
        lines = incidents(d, task_id)
        assert fires(d) == {"first_output": 1}  # the retry never started
    assert task["status"] == "cancelled"
    # The retry never started (above) shows the order; the time only shows the backoff was
    # cut, a safety net far above the quiet second or so the cancel takes.
    assert took < BACKOFF / 2
    assert [(i["scope"], i["action"]) for i in lines] == [("first_output", "retry")]
    assert task["complete_calls"] == 0 and task["fail_calls"] == 0
