"""The real OpenClaw through the whole daemon, against the fake Chat Completions API.

OpenClaw prints its answer once, when its turn is over, and nothing while it works: the daemon
cannot tell a tool at work from a stalled model, so no window shorter than the turn holds (as
in Multica) and a tool longer than the idle window is not a scenario here. What is: an answer
after a tool completes with OpenClaw's session, usage and the brief it was sent in the message;
a stalled model is stopped once the silence outlasts the first-output budget, and nothing
OpenClaw started survives. Skipped, with the install command as the reason, only when the CLI
is not installed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from backends.openclaw import OpenclawBackend
from daemon.testing import task_processes
from tests.e2e.stall_support import KILL_GRACE
from tests.fakes.chat_api import fake_chat, openclaw_env
from tests.fakes.openai_api import Answer, FakeOpenAI, Shell, Stall
from tests.fakes.real_cli import require_cli
from tests.helpers import RunningDaemon, cli_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

FIRST_OUTPUT = 20.0
"""The stalled task's first-output budget: OpenClaw's whole turn is silent."""


@asynccontextmanager
async def openclaw_daemon(
    tmp_path: Path, script: list[Any], **env: str
) -> AsyncIterator[tuple[RunningDaemon, FakeOpenAI]]:
    path = require_cli("openclaw", "MULTICA_TEST_OPENCLAW_PATH")
    async with fake_chat(script) as api:
        agent_env = openclaw_env(tmp_path / "agent", api.url)
        backends = {"openclaw": (OpenclawBackend(path), "test")}
        async with cli_daemon(
            tmp_path, agent_env, backends, MULTICA_AGENT_KILL_GRACE=f"{KILL_GRACE:g}s", **env
        ) as d:
            yield d, api


async def test_an_answer_after_a_tool_completes_with_session_and_usage(tmp_path: Path) -> None:
    """OpenClaw runs a shell command, then answers: the task completes with the answer, the
    daemon's session id and the fake's usage; the brief reached the model in the message."""
    script = [Shell("echo from-the-tool"), Answer("All done here.")]
    async with openclaw_daemon(tmp_path, script) as (d, api):
        task = await d.wait(await d.submit("Do it.", backend="openclaw"), within=240)
    assert task["status"] == "completed", task
    assert task["output"] == "All done here."
    assert task["session_id"].startswith("multica-")
    first, second = api.main_requests()
    assert "Multica Agent Runtime" in json.dumps(first.body)
    assert second.n_tool_outputs == 1 and "from-the-tool" in json.dumps(second.body)
    assert task_processes(task["id"]) == []


async def test_a_stalled_model_is_stopped_and_nothing_survives(tmp_path: Path) -> None:
    """The model sends one chunk, then nothing: the first-output budget stops the run."""
    budget = {"MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT": f"{FIRST_OUTPUT:g}s"}
    async with openclaw_daemon(tmp_path, [Stall("first-chunk")], **budget) as (d, api):
        task = await d.wait(await d.submit("Do it.", backend="openclaw"), within=240)
    # On a loaded machine OpenClaw may still be starting when the budget runs out: either way
    # the model never answered.
    assert len(api.main_requests()) <= 1
    assert task["status"] == "failed" and task["failure_reason"] == "idle_watchdog", task
    assert "no first output" in task["error"]
    assert task_processes(task["id"]) == []
