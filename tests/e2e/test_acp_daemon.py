"""The real OpenCode, Gemini CLI, Hermes Agent, Grok Build and QwenPaw through the whole daemon,
over ACP, against fake model APIs.

Each CLI runs offline against its fake (Chat Completions for all but Gemini CLI, the Gemini API
for it) under a short idle window: a shell command longer than the window is
a tool in flight and completes; a model stream that stalls after its first chunk, or after a
tool, is stopped as `idle_watchdog` within 1.5 windows plus the kill grace, and nothing the agent
started survives — not even a process its shell tool detached into a session of its own.
Skipped, with the install command as the reason, only when the CLI is not installed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backends.acp import AcpAgent, AcpBackend
from backends.acp.catalog import GROK, HERMES, QWENPAW
from backends.gemini import GEMINI
from backends.opencode import OPENCODE
from tests.e2e.stall_support import (
    DETACH,
    SAFETY_NET,
    SLEEP_TOOL,
    WINDOW,
    assert_stopped_in_time,
    stalled_task,
    tool_types,
    watched_cli,
)
from tests.fakes.chat_api import fake_chat, grok_env, hermes_env, opencode_env, qwenpaw_env
from tests.fakes.gemini_api import fake_gemini, gemini_env
from tests.fakes.openai_api import Answer, FakeOpenAI, Shell, Stall
from tests.fakes.real_cli import require_cli
from tests.helpers import RunningDaemon, incidents

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


@dataclass(frozen=True)
class Cli:
    """One real CLI, its table entry and the fake API it talks to."""

    agent: AcpAgent
    fake: Callable[..., AbstractAsyncContextManager[FakeOpenAI]]
    env: Callable[[Path, str], dict[str, str]]


CLIS = [
    Cli(OPENCODE, fake_chat, opencode_env),
    Cli(GEMINI, fake_gemini, gemini_env),
    Cli(HERMES, fake_chat, hermes_env),
    Cli(GROK, fake_chat, grok_env),
    Cli(QWENPAW, fake_chat, qwenpaw_env),
]


@pytest.fixture(params=CLIS, ids=[c.agent.name for c in CLIS])
def cli(request: pytest.FixtureRequest) -> Cli:
    return request.param  # type: ignore[no-any-return]


@asynccontextmanager
async def acp_daemon(
    cli: Cli, tmp_path: Path, script: list[Any]
) -> AsyncIterator[tuple[RunningDaemon, FakeOpenAI]]:
    """A daemon serving the real CLI, pointed at its fake API (discovery has tests of its own:
    tests/backends/acp/test_real_clis.py)."""
    name = cli.agent.name
    path = require_cli(cli.agent.command, f"MULTICA_TEST_{name.upper()}_PATH")
    async with cli.fake(script) as api:
        agent_env = cli.env(tmp_path / "agent", api.url)
        async with watched_cli(tmp_path, agent_env, name, AcpBackend(cli.agent, path)) as d:
            yield d, api


async def test_tool_longer_than_the_window_completes(cli: Cli, tmp_path: Path) -> None:
    """A shell command longer than the window is a tool in flight: the run completes, its
    answer the output, with the runtime brief read from the file the CLI loads."""
    script = [Shell(SLEEP_TOOL), Answer("Slept well.")]
    async with acp_daemon(cli, tmp_path, script) as (d, api):
        task = await d.wait(await d.submit("Sleep.", backend=cli.agent.name), within=120)
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    # Hermes opens its answer with a blank line, which the output keeps (as in Multica).
    assert task["output"].strip() == "Slept well."
    assert task["session_id"]
    uses = [m for m in messages if m["type"] == "tool_use"]
    results = [m for m in messages if m["type"] == "tool_result"]
    assert len(uses) == 1 and len(results) == 1
    assert SLEEP_TOOL.split(" &&")[0] in str(uses[0]["input"])
    assert [m["content"].strip() for m in messages if m["type"] == "text"] == ["Slept well."]
    assert incidents(d) == []
    assert api.main_requests()[1].n_tool_outputs == 1
    # The runtime brief reached the model: the CLI loaded the file it was written to.
    assert "Multica Agent Runtime" in json.dumps(api.main_requests()[0].body)


async def test_stall_after_the_first_chunk_is_stopped(cli: Cli, tmp_path: Path) -> None:
    """The model sends one chunk and then nothing: idle_watchdog in time, nothing survives."""
    async with acp_daemon(cli, tmp_path, [Stall("first-chunk")]) as (d, api):
        stalled = await stalled_task(d, api, cli.agent.name, "Do it.", 1)
    assert_stopped_in_time(stalled, cli.agent.name)
    assert (
        WINDOW <= stalled.records[0]["idle_seconds"] <= SAFETY_NET
    )  # never early; on time: test_watchdog


async def test_stall_after_a_tool_is_stopped_with_the_tools_leftovers(
    cli: Cli, tmp_path: Path
) -> None:
    """A tool leaves a detached process, then the model stalls: idle_watchdog, all killed."""
    async with acp_daemon(cli, tmp_path, [Shell(DETACH), Stall()]) as (d, api):
        stalled = await stalled_task(d, api, cli.agent.name, "Start it.", 2)
    assert_stopped_in_time(stalled, cli.agent.name)
    assert tool_types(stalled) == ["tool_use", "tool_result"]
