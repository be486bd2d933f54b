"""Shutdown of a real daemon process: SIGTERM lets tasks finish, reports them, exits 0."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import Process

from tests.helpers import daemon_env, daemon_process, embedded_server, eventually, server_client

pytestmark = pytest.mark.anyio


async def status_of(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = (await http.get(f"/api/tasks/{task_id}")).json()
    return task


@asynccontextmanager
async def daemon_running_task(
    tmp_path: Path, steps: list[dict[str, Any]], grace: str
) -> AsyncIterator[tuple[Process, httpx.AsyncClient, str]]:
    """A daemon process whose single task has reached `running` on the server."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        server_client(url) as http,
        daemon_process(daemon_env(tmp_path, url, MULTICA_DAEMON_SHUTDOWN_GRACE=grace)) as proc,
    ):
        prompt = json.dumps({"steps": steps})
        task_id = (await http.post("/api/tasks", json={"prompt": prompt})).json()["id"]

        async def running() -> bool:
            return (await status_of(http, task_id))["status"] == "running"

        await eventually(running, within=20)
        yield proc, http, task_id


async def exit_code_and_time(proc: Process) -> tuple[int, float]:
    begun = time.monotonic()
    with anyio.fail_after(15):
        code = await proc.wait()
    return code, time.monotonic() - begun


async def test_sigterm_lets_a_running_task_finish_and_exits_0(tmp_path: Path) -> None:
    """First SIGTERM: no new claims, the running task completes and is reported, exit 0."""
    steps = [{"text": "working"}, {"sleep": 1.0}, {"result": {"output": "finished"}}]
    async with daemon_running_task(tmp_path, steps, grace="10s") as (proc, http, task_id):
        proc.send_signal(signal.SIGTERM)
        code, took = await exit_code_and_time(proc)
        final = await status_of(http, task_id)
    assert code == 0
    assert final["status"] == "completed" and final["output"] == "finished"
    assert took < 10


async def test_task_outliving_the_grace_is_cancelled_and_reported(tmp_path: Path) -> None:
    """A task still running when the grace ends is stopped, reported `cancelled`, exit 0."""
    steps = [{"text": "working"}, {"hang": True}]
    async with daemon_running_task(tmp_path, steps, grace="1s") as (proc, http, task_id):
        proc.send_signal(signal.SIGTERM)
        code, took = await exit_code_and_time(proc)
        final = await status_of(http, task_id)
    assert code == 0
    assert final["status"] == "failed" and final["failure_reason"] == "cancelled"
    assert final["fail_calls"] == 1
    # Grace 1 s + kill grace 1 s + reporting: 2.3 s at load 14, each step's bound is shown on a
    # fake clock (test_shutdown_budget.py); this is a safety net 5x that.
    assert took < 12


async def test_second_signal_cancels_at_once(tmp_path: Path) -> None:
    """A second SIGTERM during a long grace cancels running tasks now instead of waiting."""
    steps = [{"text": "working"}, {"hang": True}]
    async with daemon_running_task(tmp_path, steps, grace="60s") as (proc, http, task_id):
        proc.send_signal(signal.SIGTERM)
        await anyio.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        code, took = await exit_code_and_time(proc)
        final = await status_of(http, task_id)
    assert code == 0
    assert final["failure_reason"] == "cancelled"
    assert took < 30  # not the 60 s grace (0.8 s at load 14; a safety net, not the check)
