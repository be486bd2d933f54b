"""The real Claude Code CLI through the whole daemon: claim → run → watchdog → report.

The CLI talks to a fake Anthropic Messages API on loopback (tests/fakes/anthropic_api.py), so
nothing leaves the machine. Skipped, with the install command as the reason, only when the CLI
is not installed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from backends.process import TRACKING_ENV, tagged
from tests.fakes.anthropic_api import ApiError, FakeAnthropic, Stall, Text, ToolUse, claude_env
from tests.fakes.anthropic_api import fake_anthropic as fake_api
from tests.fakes.real_cli import ON_EVERY_CLAUDE_PIN, InstalledCli
from tests.helpers import RunningDaemon, cli_daemon, incidents

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


@asynccontextmanager
async def claude_daemon(
    cli: InstalledCli, tmp_path: Path, script: list[Any], window: str = "2s", **env: str
) -> AsyncIterator[tuple[RunningDaemon, FakeAnthropic]]:
    """A daemon whose only backend is the real Claude Code CLI, pointed at a fake API."""
    async with (
        fake_api(script) as api,
        cli_daemon(
            tmp_path,
            claude_env(api.url, tmp_path / "home", **env),
            MULTICA_CLAUDE_PATH=cli.path,
            MULTICA_AGENT_IDLE_WATCHDOG=window,
        ) as d,
    ):
        yield d, api


@ON_EVERY_CLAUDE_PIN
async def test_plain_answer_completes_with_output_and_session(
    claude_cli: InstalledCli, tmp_path: Path
) -> None:
    """A plain answer completes; the answer is the output and the session id is recorded."""
    async with claude_daemon(claude_cli, tmp_path, [Text("The answer is 42.")]) as (d, _):
        task = await d.wait(await d.submit("What is the answer?", backend="claude"), within=60)
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    assert task["output"] == "The answer is 42."
    assert task["session_id"]
    assert [m["content"] for m in messages if m["type"] == "text"] == ["The answer is 42."]


@ON_EVERY_CLAUDE_PIN
async def test_bash_tool_longer_than_the_window_completes(
    claude_cli: InstalledCli, tmp_path: Path
) -> None:
    """A real Bash tool call running 2× the idle window is not stopped by the watchdog."""
    script = [ToolUse("sleep 4 && echo slept"), Text("Slept well.")]
    async with claude_daemon(claude_cli, tmp_path, script, window="2s") as (d, _):
        task = await d.wait(await d.submit("Sleep a bit.", backend="claude"), within=90)
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    assert task["output"] == "Slept well."
    (use,) = [m for m in messages if m["type"] == "tool_use"]
    assert use["tool"] == "Bash" and use["input"]["command"] == "sleep 4 && echo slept"
    (done,) = [m for m in messages if m["type"] == "tool_result"]
    assert done["tool"] == "Bash" and "slept" in done["output"]  # named after its call
    assert incidents(d) == []


async def _stalled(
    claude_cli: InstalledCli, tmp_path: Path, script: list[Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one task whose API stalls; return the task and the incident records."""
    async with claude_daemon(claude_cli, tmp_path, script, window="2s") as (d, api):
        task_id = await d.submit("Do the thing.", backend="claude")
        task = await d.wait(task_id, within=90)
        assert tagged(TRACKING_ENV, task_id) == [], "a process of the CLI's tree survived"
        assert len(api.main_requests()) == len(script)
        return task, incidents(d)


@ON_EVERY_CLAUDE_PIN
async def test_stalled_api_is_stopped_by_the_watchdog(
    claude_cli: InstalledCli, tmp_path: Path
) -> None:
    """The API accepts the request and sends nothing: idle_watchdog at window…1.5×window."""
    task, records = await _stalled(claude_cli, tmp_path, [Stall()])
    assert task["status"] == "failed" and task["failure_reason"] == "idle_watchdog"
    (record,) = records
    assert record["scope"] == "idle" and record["threshold"] == 2.0
    assert 2.0 <= record["idle_seconds"] <= 3.0 + 0.5


@ON_EVERY_CLAUDE_PIN
async def test_tool_call_then_stalled_api_is_stopped(
    claude_cli: InstalledCli, tmp_path: Path
) -> None:
    """A finished tool call followed by a stalled API is idle, not busy: stopped the same way."""
    task, records = await _stalled(claude_cli, tmp_path, [ToolUse("echo done"), Stall()])
    assert task["failure_reason"] == "idle_watchdog"
    (record,) = records
    assert record["scope"] == "idle" and record["tools_in_flight"] == []
    assert record["last_message_type"] in ("tool_result", "text", "status")
    assert 2.0 <= record["idle_seconds"] <= 3.0 + 0.5


async def test_overloaded_api_fails_with_the_cli_error(
    claude_cli: InstalledCli, tmp_path: Path
) -> None:
    """529 on every try: the task fails with the CLI's error, not as idle_watchdog."""
    script = [ApiError()] * 3
    async with claude_daemon(claude_cli, tmp_path, script, CLAUDE_CODE_MAX_RETRIES="2") as (d, _):
        begun = time.monotonic()
        task = await d.wait(await d.submit("Hello?", backend="claude"), within=90)
    assert task["status"] == "failed"
    # Named by the daemon: the CLI's fields, then the text rules, say capacity.
    assert task["failure_reason"] == "agent_error.provider_capacity_or_rate_limit"
    assert "529" in task["error"]
    assert time.monotonic() - begun < 60


async def test_second_task_resumes_the_first_session(
    claude_cli: InstalledCli, tmp_path: Path
) -> None:
    """A task with prior_session_id resumes that session (the API sees the earlier turns)."""
    script = [Text("First answer."), Text("Second answer.")]
    async with claude_daemon(claude_cli, tmp_path, script) as (d, api):
        first = await d.wait(await d.submit("First question.", backend="claude"), within=60)
        second_id = await d.submit(
            "Second question.", backend="claude", prior_session_id=first["session_id"]
        )
        second = await d.wait(second_id, within=60)
        messages = await d.api.messages(second["id"])
    assert second["status"] == "completed", second
    assert second["output"] == "Second answer."
    assert second["session_id"] == first["session_id"]
    assert not any("not found" in (m["content"] or "") for m in messages)
    first_call, second_call = api.main_requests()
    assert second_call.n_messages > first_call.n_messages
