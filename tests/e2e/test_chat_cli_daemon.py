"""The real Pi CLI through the whole daemon, against the fake Chat Completions API.

Pi runs offline against the fake under a 4 s idle window: an answer completes; a 10 s shell
command is a tool in flight and completes; a model stream that stalls after its first chunk,
or after a tool, is stopped as `idle_watchdog` within 1.5 windows plus the kill grace, and
nothing Pi started survives — not even a process its shell tool detached into a session of
its own. Resuming is tested on the backend (tests/backends/pi/test_real.py). Skipped, with the
install command as the reason, only when the CLI is not installed.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from backends.base import Backend
from backends.pi import PiBackend
from daemon.testing import task_processes
from tests.fakes.chat_api import fake_chat, pi_env
from tests.fakes.openai_api import Answer, FakeOpenAI, Shell, Stall
from tests.fakes.real_cli import require_cli
from tests.helpers import RunningDaemon, embedded_server, incidents, running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

WINDOW = 4.0
KILL_GRACE = 1.0
# The watchdog fires between 1 and 1.5 windows of silence, the kill takes at most the grace;
# the margin covers the CLI's own latency and the daemon's report reaching the server.
STOP_BOUND = 1.5 * WINDOW + KILL_GRACE
MARGIN = 2.0


@asynccontextmanager
async def pi_daemon(
    tmp_path: Path, script: list[Any]
) -> AsyncIterator[tuple[RunningDaemon, FakeOpenAI]]:
    """A daemon serving the real Pi, pointed at the fake API.

    The backend is handed in rather than discovered: `--version` of a Node CLI costs seconds
    on a loaded machine."""
    path = require_cli("pi", "MULTICA_TEST_PI_PATH")
    backends: dict[str, tuple[Backend, str]] = {"pi": (PiBackend(path), "test")}
    async with (
        fake_chat(script) as api,
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(
            tmp_path,
            url,
            base_env=pi_env(tmp_path / "agent", api.url),
            backends=backends,
            MULTICA_SCRIPTED_BACKEND="0",
            MULTICA_AGENT_IDLE_WATCHDOG=f"{WINDOW:g}s",
            MULTICA_AGENT_KILL_GRACE=f"{KILL_GRACE:g}s",
        ) as d,
    ):
        yield d, api


async def stopped_after_stall(
    d: RunningDaemon, api: FakeOpenAI, task_id: str, requests: int
) -> tuple[dict[str, Any], float]:
    """The task once ended, and the seconds from the stalled request (the `requests`-th the
    model got) to its end."""
    task = await d.wait(task_id, within=120)
    ended_at = time.monotonic()
    calls = api.main_requests()
    assert len(calls) == requests, api.log()
    return task, ended_at - (api.started + calls[-1].t)


async def test_answer_completes_with_its_text_and_session(tmp_path: Path) -> None:
    """An answer completes with its text as the output and Pi's session id recorded, the
    runtime brief having reached the model through the AGENTS.md Pi loads."""
    async with pi_daemon(tmp_path, [Answer("All done here.")]) as (d, api):
        started = time.monotonic()
        task = await d.wait(await d.submit("Do it.", backend="pi"), within=90)
        print(f"pi: the answer task took {time.monotonic() - started:.2f}s")
    assert task["status"] == "completed", task
    assert task["output"] == "All done here."
    assert task["session_id"]
    assert "Multica Agent Runtime" in json.dumps(api.main_requests()[0].body)
    assert task_processes(task["id"]) == []


async def test_tool_longer_than_the_window_completes(tmp_path: Path) -> None:
    """A 10 s shell command under a 4 s window is a tool in flight: the run completes."""
    script = [Shell("sleep 10 && echo slept"), Answer("Slept well.")]
    async with pi_daemon(tmp_path, script) as (d, api):
        started = time.monotonic()
        task = await d.wait(await d.submit("Sleep.", backend="pi"), within=120)
        print(f"pi: the 10 s tool task took {time.monotonic() - started:.2f}s")
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    assert task["output"] == "Slept well."
    uses = [m for m in messages if m["type"] == "tool_use"]
    results = [m for m in messages if m["type"] == "tool_result"]
    assert len(uses) == 1 and len(results) == 1
    assert "sleep 10" in str(uses[0]["input"])
    assert "slept" in results[0]["output"]
    assert incidents(d) == []
    assert api.main_requests()[1].n_tool_outputs == 1


async def test_stall_after_the_first_chunk_is_stopped(tmp_path: Path) -> None:
    """The model sends one chunk and then nothing: idle_watchdog in time, nothing survives."""
    async with pi_daemon(tmp_path, [Stall("first-chunk")]) as (d, api):
        task_id = await d.submit("Do it.", backend="pi")
        task, took = await stopped_after_stall(d, api, task_id, 1)
        records = incidents(d)
    assert task["failure_reason"] == "idle_watchdog", task
    (record,) = records
    assert record["scope"] == "idle"
    assert WINDOW <= record["idle_seconds"] <= 1.5 * WINDOW + 0.5
    print(f"pi: {took:.2f}s from the stalled request to the end of the task")
    assert took <= STOP_BOUND + MARGIN, took
    assert task_processes(task_id) == []


async def test_stall_after_a_tool_is_stopped_with_the_tools_leftovers(tmp_path: Path) -> None:
    """A tool leaves a detached process, then the model stalls: idle_watchdog, all killed."""
    detach = "setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo detached"
    async with pi_daemon(tmp_path, [Shell(detach), Stall()]) as (d, api):
        task_id = await d.submit("Start it.", backend="pi")
        task, took = await stopped_after_stall(d, api, task_id, 2)
        records = incidents(d)
        messages = await d.api.messages(task_id)
    assert task["failure_reason"] == "idle_watchdog", task
    assert [m["type"] for m in messages if m["type"].startswith("tool")] == [
        "tool_use",
        "tool_result",
    ]
    (record,) = records
    assert record["scope"] == "idle"
    print(f"pi: {took:.2f}s from the stalled request to the end of the task")
    assert took <= STOP_BOUND + MARGIN, took
    assert task_processes(task_id) == []
