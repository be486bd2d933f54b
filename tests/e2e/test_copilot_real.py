"""The real Copilot CLI through the whole daemon, offline, against the fake Chat Completions API.

Copilot CLI takes a provider of its own (`COPILOT_PROVIDER_BASE_URL`, `COPILOT_OFFLINE=true`):
no GitHub login, no network. Under a short idle window a shell command longer than the window
is a tool in flight and completes; a model stream that stalls after its first chunk, or after a
tool, is stopped as `idle_watchdog`, and nothing the agent started survives. Skipped, with the
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

from backends.copilot import CopilotBackend
from daemon.testing import task_processes
from tests.e2e.stall_support import (
    DETACH,
    SLEEP_TOOL,
    assert_stopped_in_time,
    stalled_task,
    tool_types,
    watched_cli,
)
from tests.fakes.chat_api import FakeChat, fake_chat
from tests.fakes.copilot_cli import copilot_env
from tests.fakes.openai_api import Answer, Shell, Stall
from tests.fakes.real_cli import require_cli
from tests.helpers import RunningDaemon, eventually, incidents

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


@asynccontextmanager
async def copilot_daemon(
    tmp_path: Path, script: list[Any]
) -> AsyncIterator[tuple[RunningDaemon, FakeChat]]:
    """A daemon serving the real CLI, pointed at the fake API."""
    path = require_cli("copilot", "MULTICA_TEST_COPILOT_PATH")
    async with fake_chat(script) as api:
        agent_env = copilot_env(tmp_path / "agent", api.url)
        async with watched_cli(tmp_path, agent_env, "copilot", CopilotBackend(path)) as d:
            yield d, api


async def test_an_answer_completes_with_its_text_and_session(tmp_path: Path) -> None:
    """A plain answer: completed, the answer as output, the session recorded."""
    async with copilot_daemon(tmp_path, [Answer("All done here.")]) as (d, _):
        task = await d.wait(await d.submit("Do it.", backend="copilot"), within=120)
    assert task["status"] == "completed", task
    assert task["output"] == "All done here."
    assert task["session_id"]


async def test_tool_longer_than_the_window_completes(tmp_path: Path) -> None:
    """A shell command longer than the window is a tool in flight: the run completes."""
    script = [Shell(SLEEP_TOOL), Answer("Slept well.")]
    async with copilot_daemon(tmp_path, script) as (d, api):
        started = time.monotonic()
        task = await d.wait(await d.submit("Sleep.", backend="copilot"), within=120)
        print(f"copilot: the tool task took {time.monotonic() - started:.2f}s")
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    assert task["output"] == "Slept well."
    uses = [m for m in messages if m["type"] == "tool_use"]
    results = [m for m in messages if m["type"] == "tool_result"]
    assert len(uses) == 1 and len(results) == 1
    assert SLEEP_TOOL.split(" &&")[0] in str(uses[0]["input"])
    assert "slept" in results[0]["output"]
    assert incidents(d) == []
    assert api.main_requests()[1].n_tool_outputs == 1
    # The runtime brief reached the model: the CLI loaded AGENTS.md from the work directory.
    assert "Multica Agent Runtime" in json.dumps(api.main_requests()[0].body)


async def test_a_second_task_resumes_the_first_session(tmp_path: Path) -> None:
    """A task naming the first one's session continues it: same session, the first turn in
    the second request."""
    async with copilot_daemon(tmp_path, [Answer("First."), Answer("Second.")]) as (d, api):
        first = await d.wait(await d.submit("One.", backend="copilot"), within=120)
        second_id = await d.submit("Two.", backend="copilot", prior_session_id=first["session_id"])
        second = await d.wait(second_id, within=120)
    assert (second["status"], second["output"]) == ("completed", "Second."), second
    assert second["session_id"] == first["session_id"]
    assert "First." in json.dumps(api.main_requests()[1].body)


async def test_a_session_the_cli_does_not_know_is_started_fresh(tmp_path: Path) -> None:
    """`--resume` of an unknown session fails at once; the same run starts a fresh session."""
    gone = "0b0e9a55-1111-4222-8333-944455556666"
    async with copilot_daemon(tmp_path, [Answer("Fresh.")]) as (d, _):
        task_id = await d.submit("Go.", backend="copilot", prior_session_id=gone)
        task = await d.wait(task_id, within=120)
    assert (task["status"], task["output"]) == ("completed", "Fresh."), task
    assert task["session_id"] not in ("", gone)


async def test_stall_after_the_first_chunk_is_stopped(tmp_path: Path) -> None:
    """The model sends one chunk and then nothing: idle_watchdog in time, nothing survives."""
    async with copilot_daemon(tmp_path, [Stall("first-chunk")]) as (d, api):
        stalled = await stalled_task(d, api, "copilot", "Do it.", 1)
    assert_stopped_in_time(stalled, "copilot")


async def test_stall_after_a_tool_is_stopped_with_the_tools_leftovers(tmp_path: Path) -> None:
    """A tool leaves a detached process, then the model stalls: idle_watchdog, all killed."""
    async with copilot_daemon(tmp_path, [Shell(DETACH), Stall()]) as (d, api):
        stalled = await stalled_task(d, api, "copilot", "Start it.", 2)
    assert_stopped_in_time(stalled, "copilot")
    assert tool_types(stalled) == ["tool_use", "tool_result"]


async def test_the_tasks_skill_reaches_the_model(tmp_path: Path) -> None:
    """An inline skill of the task is written where Copilot CLI finds project skills
    (`.github/skills/`): its description is in the request the API receives."""
    marker = "Deploys-with-the-zebra-checklist"
    skills = [{"name": "zebra-deploy", "description": marker, "content": "Use the zebra list."}]
    async with copilot_daemon(tmp_path, [Answer("ok")]) as (d, api):
        created = await d.api.create_task("Deploy it.", backend="copilot", agent={"skills": skills})
        task = await d.wait(created["id"], within=120)
    assert task["status"] == "completed", task
    assert marker in json.dumps(api.main_requests()[0].body)


async def test_no_process_of_the_run_shows_the_prompt_in_its_command_line(
    tmp_path: Path,
) -> None:
    """While the real CLI runs a tool, no process of the task (the npm loader, the native
    binary, the shell) shows the prompt in /proc/<pid>/cmdline, which every
    local user can read; the model got it all the same."""
    prompt = "Rotate the 5d1e-kestrel credentials now."
    go = tmp_path / "go"
    # The tool waits for the test to have read every command line, then lets the run end.
    script = [Shell(f"while [ ! -e {go} ]; do sleep 0.05; done; echo rotated"), Answer("Rotated.")]
    async with copilot_daemon(tmp_path, script) as (d, api):
        task_id = await d.submit(prompt, backend="copilot")
        seen: dict[int, bytes] = {}

        def tool_running() -> bool:
            seen.update({p.pid: _cmdline(p.pid) for p in task_processes(task_id)})
            return any(str(go).encode() in line for line in seen.values())

        await eventually(tool_running, within=60, what="the task's shell tool")
        seen.update({p.pid: _cmdline(p.pid) for p in task_processes(task_id)})
        go.touch()
        task = await d.wait(task_id, within=120)
    assert task["status"] == "completed", task
    assert len(seen) >= 3, seen  # loader, native binary, shell, ...
    assert not [line for line in seen.values() if b"5d1e-kestrel" in line], seen
    assert "5d1e-kestrel" in json.dumps(api.main_requests()[0].body)


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""  # gone since it was listed
