"""The status page in a real headless Chromium, against `agent-daemon run` on its embedded server.

Each state the page reaches is saved as a screenshot: in the directory named by
`AGENT_DAEMON_PAGE_SHOTS` when set, else under the test's tmp path (printed either way).
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from daemon.cli.tasks_api import TasksApi
from tests.daemon_child import DaemonChild, daemon_child
from tests.e2e.browser import Browser, chromium
from tests.helpers import FINAL, daemon_env, eventually, server_client

pytestmark = pytest.mark.anyio

_EMBEDDED = re.compile(r"embedded server listening on (http://\S+)")


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where this test's screenshots go."""
    base = os.environ.get("AGENT_DAEMON_PAGE_SHOTS")
    path = Path(base) if base else tmp_path / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {path}")
    return path


@pytest.fixture
def browser(tmp_path: Path, shots: Path) -> Iterator[Browser]:
    """A fresh headless Chromium."""
    with chromium(tmp_path / "chromium-profile", shots) as made:
        yield made


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def page_daemon(home: Path, **env: str) -> AsyncIterator[tuple[DaemonChild, TasksApi]]:
    """`agent-daemon run` with its embedded server and the scripted agent; its task API."""
    settings = daemon_env(home, "", MULTICA_EMBEDDED_LISTEN="127.0.0.1:0", **env)
    async with daemon_child(settings) as child:
        await eventually(lambda: _EMBEDDED.search(child.log) is not None, within=15)
        url = _EMBEDDED.search(child.log).group(1)  # type: ignore[union-attr]
        async with server_client(url) as http:
            yield child, TasksApi(http)


async def submit(api: TasksApi, steps: list[dict[str, Any]]) -> str:
    """Queue a scripted task; its id."""
    task = await api.create_task(json.dumps({"steps": steps}), backend="scripted")
    return str(task["id"])


async def ended(api: TasksApi, task_id: str, within: float = 30.0) -> dict[str, Any]:
    """The task once the server has it terminal."""

    async def done() -> bool:
        return (await api.get_task(task_id))["status"] in FINAL

    await eventually(done, within=within, every=0.1)
    return await api.get_task(task_id)


async def test_a_task_in_a_long_tool_shows_in_a_tool_and_a_countdown_that_never_ends(
    tmp_path: Path, browser: Browser
) -> None:
    """A 10 s tool call past the idle window: "in a tool", the tool window counting down and
    never reaching zero, then the task finishes completed."""
    env = {"MULTICA_AGENT_IDLE_WATCHDOG": "3s", "MULTICA_AGENT_TOOL_WATCHDOG": "20s"}
    async with page_daemon(tmp_path, **env) as (child, api):
        await browser.open(child.health_url + "/")
        tool = {"name": "Bash", "input": {"command": "make"}, "seconds": 10, "output": "ok"}
        task_id = await submit(api, [{"text": "building"}, {"tool": tool}, {"result": {}}])
        await browser.wait_for(lambda s: s == ["in a tool"], "#running tbody td.state")
        (shown,) = await browser.wait_for(lambda s: len(s) == 1, "#running tbody td.tool")
        assert shown.startswith("Bash for ")
        (window,) = await browser.texts("#running tbody td.window")
        assert window == "tool 20s"
        # Past the idle window the tool window still holds: the countdown stays above zero.
        lows: list[float] = []

        async def past_idle_window() -> bool:
            left = await browser.texts("#running tbody tr", "data-fires-in")
            lows.extend(float(v) for v in left if v)
            return bool(lows) and lows[-1] < 20 - 4

        await eventually(past_idle_window, within=30, every=0.05)
        await browser.shot("in-a-tool")

        async def gone() -> bool:
            left = await browser.texts("#running tbody tr", "data-fires-in")
            lows.extend(float(v) for v in left if v)
            return not left

        await eventually(gone, within=30, every=0.05)
        outcome = await browser.wait_for(lambda s: s != [], "#finished tbody td.outcome")
        task = await ended(api, task_id)
        errors = await browser.errors()
    assert task["status"] == "completed", task
    assert min(lows) > 5, f"the countdown fell to {min(lows)}s of 20s in a 10s tool"
    assert outcome == ["completed"]
    assert errors == [], "the page logged errors"


async def test_a_silent_task_counts_down_to_zero_and_finishes_as_idle_watchdog(
    tmp_path: Path, browser: Browser
) -> None:
    """A task that goes quiet: its idle countdown reaches zero, then the row moves to the
    finished table as idle_watchdog."""
    env = {"MULTICA_AGENT_IDLE_WATCHDOG": "3s", "MULTICA_AGENT_IDLE_RETRIES": "0"}
    async with page_daemon(tmp_path, **env) as (child, api):
        await browser.open(child.health_url + "/")
        task_id = await submit(api, [{"text": "thinking"}, {"hang": True}])
        await browser.wait_for(lambda s: s == ["idle 3.0s"], "#running tbody td.window")
        await browser.shot("silent-counting-down")
        await browser.wait_for(lambda s: s == ["0.0"], "#running tbody tr", "data-fires-in")
        await browser.shot("silent-due")
        await browser.wait_for(lambda s: s == [], "#running tbody tr")
        outcome = await browser.wait_for(lambda s: s != [], "#finished tbody td.outcome")
        reason = await browser.texts("#finished tbody td.reason")
        await browser.shot("silent-finished")
        task = await ended(api, task_id)
    assert outcome == ["idle_watchdog"]
    assert reason == ["idle_watchdog"]
    assert task["failure_reason"] == "idle_watchdog"


async def test_the_page_survives_a_daemon_restart(tmp_path: Path, browser: Browser) -> None:
    """The daemon stops: the page says it is unreachable; a new one on the same port: the page
    shows the new daemon without a reload."""
    env = {"MULTICA_DAEMON_HEALTH_ADDR": f"127.0.0.1:{_free_port()}"}
    async with page_daemon(tmp_path, **env) as (first, _):
        await browser.open(first.health_url + "/")
        await browser.wait_for(lambda s: s == [str(first.process.pid)], "#pid")
        await browser.wait_for(lambda s: s == ["live"], "#link", "data-state")
        await browser.shot("restart-first-daemon")
        await first.stop()
        await browser.wait_for(lambda s: s == ["offline"], "#link", "data-state")
        await browser.shot("restart-unreachable")
    async with page_daemon(tmp_path, **env) as (second, api):
        task_id = await submit(api, [{"text": "hello again"}, {"result": {"output": "done"}}])
        await ended(api, task_id)
        await browser.wait_for(lambda s: s == [str(second.process.pid)], "#pid")
        await browser.wait_for(lambda s: s == ["live"], "#link", "data-state")
        await browser.wait_for(lambda s: s == ["completed"], "#finished tbody td.outcome")
        await browser.shot("restart-second-daemon")
    assert first.process.pid != second.process.pid
