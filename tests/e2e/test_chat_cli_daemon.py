"""The real Pi, Oh-My-Pi and Qwen Code CLIs through the whole daemon, against the fake Chat
Completions API.

Each CLI runs offline against the fake under a short idle window: an answer completes; a shell
command longer than the window is a tool in flight and completes; a model stream that stalls
after its first chunk, or after a tool, is stopped as `idle_watchdog` within 1.5 windows plus
the kill grace, and nothing the CLI started survives — not even a process its shell tool
detached into a session of its own. Resuming is tested on each backend
(tests/backends/*/test_real.py). Skipped, with the install command as the reason, only when the
CLI is not installed.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backends.agent_cli import AgentCli
from backends.omp import OmpBackend
from backends.pi import PiBackend
from backends.qwen import QwenBackend
from daemon.testing import task_processes
from tests.e2e.stall_support import (
    DETACH,
    SAFETY_NET,
    TOOL_SECONDS,
    WINDOW,
    assert_stopped_in_time,
    stalled_task,
    tool_types,
    watched_cli,
)
from tests.fakes.chat_api import fake_chat, omp_env, pi_env, qwen_env
from tests.fakes.openai_api import Answer, FakeOpenAI, Shell, Stall
from tests.fakes.real_cli import require_cli
from tests.helpers import RunningDaemon, incidents

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

# Qwen Code refuses `sleep N && …` in the foreground ("run blocking commands in the
# background"); a Python sleep it runs.
SLEEP_TOOL = f"python3 -c 'import time; time.sleep({TOOL_SECONDS})' && echo slept"


@dataclass(frozen=True)
class Cli:
    """One real CLI: its backend and its environment pointed at the fake."""

    backend: type[AgentCli]
    env: Callable[[Path, str], dict[str, str]]

    @property
    def name(self) -> str:
        return self.backend.name


CLIS = [Cli(PiBackend, pi_env), Cli(OmpBackend, omp_env), Cli(QwenBackend, qwen_env)]


@pytest.fixture(params=CLIS, ids=[c.name for c in CLIS])
def cli(request: pytest.FixtureRequest) -> Cli:
    return request.param  # type: ignore[no-any-return]


@asynccontextmanager
async def cli_daemon(
    cli: Cli, tmp_path: Path, script: list[Any]
) -> AsyncIterator[tuple[RunningDaemon, FakeOpenAI]]:
    """A daemon serving the real CLI, pointed at the fake API."""
    path = require_cli(cli.name, f"MULTICA_TEST_{cli.name.upper()}_PATH")
    async with fake_chat(script) as api:
        agent_env = cli.env(tmp_path / "agent", api.url)
        async with watched_cli(tmp_path, agent_env, cli.name, cli.backend(path)) as d:
            yield d, api


async def test_answer_completes_with_its_text_and_session(cli: Cli, tmp_path: Path) -> None:
    """An answer completes with its text as the output and the CLI's session id recorded, the
    runtime brief having reached the model through the file the CLI loads."""
    async with cli_daemon(cli, tmp_path, [Answer("All done here.")]) as (d, api):
        started = time.monotonic()
        task = await d.wait(await d.submit("Do it.", backend=cli.name), within=90)
        print(f"{cli.name}: the answer task took {time.monotonic() - started:.2f}s")
    assert task["status"] == "completed", task
    assert task["output"] == "All done here."
    assert task["session_id"]
    assert "Multica Agent Runtime" in json.dumps(api.main_requests()[0].body)
    assert task_processes(task["id"]) == []


async def test_tool_longer_than_the_window_completes(cli: Cli, tmp_path: Path) -> None:
    """A shell command longer than the window is a tool in flight: the run completes."""
    script = [Shell(SLEEP_TOOL), Answer("Slept well.")]
    async with cli_daemon(cli, tmp_path, script) as (d, api):
        started = time.monotonic()
        task = await d.wait(await d.submit("Sleep.", backend=cli.name), within=120)
        print(f"{cli.name}: the tool task took {time.monotonic() - started:.2f}s")
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    assert task["output"] == "Slept well."
    uses = [m for m in messages if m["type"] == "tool_use"]
    results = [m for m in messages if m["type"] == "tool_result"]
    assert len(uses) == 1 and len(results) == 1
    assert f"time.sleep({TOOL_SECONDS})" in str(uses[0]["input"])
    assert "slept" in results[0]["output"]
    assert incidents(d) == []
    assert api.main_requests()[1].n_tool_outputs == 1


async def test_stall_after_the_first_chunk_is_stopped(cli: Cli, tmp_path: Path) -> None:
    """The model sends one chunk and then nothing: idle_watchdog in time, nothing survives."""
    async with cli_daemon(cli, tmp_path, [Stall("first-chunk")]) as (d, api):
        stalled = await stalled_task(d, api, cli.name, "Do it.", 1)
    assert_stopped_in_time(stalled, cli.name)
    assert (
        WINDOW <= stalled.records[0]["idle_seconds"] <= SAFETY_NET
    )  # never early; on time: test_watchdog


async def test_stall_after_a_tool_is_stopped_with_the_tools_leftovers(
    cli: Cli, tmp_path: Path
) -> None:
    """A tool leaves a detached process, then the model stalls: idle_watchdog, all killed."""
    async with cli_daemon(cli, tmp_path, [Shell(DETACH), Stall()]) as (d, api):
        stalled = await stalled_task(d, api, cli.name, "Start it.", 2)
    assert_stopped_in_time(stalled, cli.name)
    assert tool_types(stalled) == ["tool_use", "tool_result"]
