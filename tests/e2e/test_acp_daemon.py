"""The real OpenCode and Gemini CLIs through the whole daemon, over ACP, against fake model APIs.

Each CLI runs offline against its fake (Chat Completions for OpenCode, the Gemini API for
Gemini CLI) under a 4 s idle window: a 10 s shell command is a tool in flight and completes;
a model stream that stalls after its first chunk, or after a tool, is stopped as
`idle_watchdog` within 1.5 windows plus the kill grace, and nothing the agent started
survives — not even a process its shell tool detached into a session of its own. Skipped,
with the install command as the reason, only when the CLI is not installed.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backends.acp import AcpAgent, AcpBackend
from backends.base import Backend
from backends.gemini import GEMINI
from backends.opencode import OPENCODE
from daemon.testing import task_processes
from tests.fakes.chat_api import fake_chat, opencode_env
from tests.fakes.gemini_api import fake_gemini, gemini_env
from tests.fakes.openai_api import Answer, FakeOpenAI, Shell, Stall
from tests.fakes.real_cli import require_cli
from tests.helpers import RunningDaemon, embedded_server, incidents, running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

WINDOW = 4.0
KILL_GRACE = 1.0
# The watchdog fires between 1 and 1.5 windows of silence (shown on a fake clock in
# test_watchdog.py), the kill takes at most the grace: on a quiet machine a stalled task ends
# 5-7 s after its stalled request. Here the bound is only a safety net, 5x that: a loaded
# machine has taken 11.7 s (the CLI's own latency and the report come on top).
STOP_BOUND = 1.5 * WINDOW + KILL_GRACE
SAFETY_NET = 5 * STOP_BOUND


@dataclass(frozen=True)
class Cli:
    """One real CLI, its table entry and the fake API it talks to."""

    agent: AcpAgent
    fake: Callable[..., AbstractAsyncContextManager[FakeOpenAI]]
    env: Callable[[Path, str], dict[str, str]]


CLIS = [Cli(OPENCODE, fake_chat, opencode_env), Cli(GEMINI, fake_gemini, gemini_env)]


@pytest.fixture(params=CLIS, ids=[c.agent.name for c in CLIS])
def cli(request: pytest.FixtureRequest) -> Cli:
    return request.param  # type: ignore[no-any-return]


@asynccontextmanager
async def acp_daemon(
    cli: Cli, tmp_path: Path, script: list[Any]
) -> AsyncIterator[tuple[RunningDaemon, FakeOpenAI]]:
    """A daemon serving the real CLI, pointed at its fake API.

    The backend is handed in rather than discovered: `--version` of a Node CLI costs seconds
    on a loaded machine, and discovery has tests of its own (tests/backends/acp/test_real_clis.py).
    """
    name = cli.agent.name
    path = require_cli(cli.agent.command, f"MULTICA_TEST_{name.upper()}_PATH")
    backends: dict[str, tuple[Backend, str]] = {name: (AcpBackend(cli.agent, path), "test")}
    async with (
        cli.fake(script) as api,
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(
            tmp_path,
            url,
            base_env=cli.env(tmp_path / "agent", api.url),
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


async def test_tool_longer_than_the_window_completes(cli: Cli, tmp_path: Path) -> None:
    """A 10 s shell command under a 4 s window is a tool in flight: the run completes, its
    answer the output, with the runtime brief read from the file the CLI loads."""
    script = [Shell("sleep 10 && echo slept"), Answer("Slept well.")]
    async with acp_daemon(cli, tmp_path, script) as (d, api):
        task = await d.wait(await d.submit("Sleep.", backend=cli.agent.name), within=120)
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    assert task["output"] == "Slept well."
    assert task["session_id"]
    uses = [m for m in messages if m["type"] == "tool_use"]
    results = [m for m in messages if m["type"] == "tool_result"]
    assert len(uses) == 1 and len(results) == 1
    assert "sleep 10" in str(uses[0]["input"])
    assert [m["content"] for m in messages if m["type"] == "text"] == ["Slept well."]
    assert incidents(d) == []
    assert api.main_requests()[1].n_tool_outputs == 1
    # The runtime brief reached the model: the CLI loaded the file it was written to.
    assert "Multica Agent Runtime" in json.dumps(api.main_requests()[0].body)


async def test_stall_after_the_first_chunk_is_stopped(cli: Cli, tmp_path: Path) -> None:
    """The model sends one chunk and then nothing: idle_watchdog in time, nothing survives."""
    async with acp_daemon(cli, tmp_path, [Stall("first-chunk")]) as (d, api):
        task_id = await d.submit("Do it.", backend=cli.agent.name)
        task, took = await stopped_after_stall(d, api, task_id, 1)
        records = incidents(d)
    assert task["failure_reason"] == "idle_watchdog", task
    (record,) = records
    assert record["scope"] == "idle"
    assert WINDOW <= record["idle_seconds"] <= SAFETY_NET  # never early; on time: test_watchdog
    print(f"{cli.agent.name}: {took:.2f}s from the stalled request to the end of the task")
    assert took <= SAFETY_NET, took
    assert task_processes(task_id) == []


async def test_stall_after_a_tool_is_stopped_with_the_tools_leftovers(
    cli: Cli, tmp_path: Path
) -> None:
    """A tool leaves a detached process, then the model stalls: idle_watchdog, all killed."""
    detach = "setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo detached"
    async with acp_daemon(cli, tmp_path, [Shell(detach), Stall()]) as (d, api):
        task_id = await d.submit("Start it.", backend=cli.agent.name)
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
    print(f"{cli.agent.name}: {took:.2f}s from the stalled request to the end of the task")
    assert took <= SAFETY_NET, took
    assert task_processes(task_id) == []
