"""The real Codex CLI as `codex app-server` through the whole daemon, against a fake OpenAI API.

Skipped, with the install command as the reason, only when the CLI is not installed.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from backends.process import TRACKING_ENV, tagged
from tests.e2e.codex_support import codex_daemon
from tests.fakes.openai_api import USAGE, Answer, FakeOpenAI, Shell, Stall
from tests.fakes.real_cli import ON_EVERY_CODEX_PIN, InstalledCli
from tests.helpers import RunningDaemon, incidents

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


def app_server_daemon(
    cli: InstalledCli, tmp_path: Path, script: list[Any], window: str = "4s"
) -> AbstractAsyncContextManager[tuple[RunningDaemon, FakeOpenAI]]:
    """A daemon running the real Codex CLI in app-server mode, pointed at a fake API."""
    return codex_daemon(cli, tmp_path, script, window, MULTICA_CODEX_MODE="app-server")


@ON_EVERY_CODEX_PIN
async def test_answer_completes_with_output_thread_and_usage(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """A plain answer completes with the answer, the thread id and the turn's usage."""
    async with app_server_daemon(codex_cli, tmp_path, [Answer("All done here.")]) as (d, _):
        task_id = await d.submit("Do it.", backend="codex")
        task = await d.wait(task_id, within=60)
    assert task["status"] == "completed", task
    assert task["output"] == "All done here."
    assert task["session_id"]
    (usage,) = task["usage"]
    assert usage["output_tokens"] == USAGE["output_tokens"]
    assert tagged(TRACKING_ENV, task_id) == []


@ON_EVERY_CODEX_PIN
async def test_ten_second_shell_under_a_four_second_window_completes(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """A 10 s shell command under a 4 s idle window is a tool in flight, not idleness."""
    script = [Shell("sleep 10 && echo slept"), Answer("Slept.")]
    async with app_server_daemon(codex_cli, tmp_path, script, window="4s") as (d, _):
        task_id = await d.submit("Sleep.", backend="codex")
        task = await d.wait(task_id, within=120)
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    (use,) = [m for m in messages if m["type"] == "tool_use"]
    (done,) = [m for m in messages if m["type"] == "tool_result"]
    assert done["tool"] == use["tool"] != "" and "slept" in done["output"]
    assert incidents(d) == []
    assert tagged(TRACKING_ENV, task_id) == []


@ON_EVERY_CODEX_PIN
async def test_stall_after_a_tool_is_stopped_by_the_watchdog(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """A command completes, then the API goes quiet: idle_watchdog, nothing survives."""
    script = [Shell("echo ran"), Stall("first-event")]
    async with app_server_daemon(codex_cli, tmp_path, script, window="4s") as (d, _):
        task_id = await d.submit("Run, then think.", backend="codex")
        task = await d.wait(task_id, within=90)
        messages = await d.api.messages(task_id)
        records = incidents(d)
    assert task["failure_reason"] == "idle_watchdog", task
    assert [m["type"] for m in messages if m["type"].startswith("tool")] == [
        "tool_use",
        "tool_result",
    ]
    assert tagged(TRACKING_ENV, task_id) == []
    (record,) = records
    assert 4.0 <= record["idle_seconds"] <= 6.0


@ON_EVERY_CODEX_PIN
async def test_stall_after_the_first_event_is_stopped_by_the_watchdog(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """The API starts its answer and then sends nothing: idle_watchdog, nothing survives."""
    async with app_server_daemon(codex_cli, tmp_path, [Stall("first-event")], window="4s") as (
        d,
        _,
    ):
        task_id = await d.submit("Do it.", backend="codex")
        task = await d.wait(task_id, within=90)
        records = incidents(d)
    assert task["failure_reason"] == "idle_watchdog", task
    assert tagged(TRACKING_ENV, task_id) == []
    (record,) = records
    assert 4.0 <= record["idle_seconds"] <= 6.0


async def test_second_task_resumes_the_first_thread(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """A task with prior_session_id resumes that thread through thread/resume; the first
    turn's items are not replayed into the second task's transcript."""
    async with app_server_daemon(codex_cli, tmp_path, [Answer("First."), Answer("Second.")]) as (
        d,
        api,
    ):
        first = await d.wait(await d.submit("One.", backend="codex"), within=60)
        second_id = await d.submit("Two.", backend="codex", prior_session_id=first["session_id"])
        second = await d.wait(second_id, within=60)
        messages = await d.api.messages(second_id)
    assert second["status"] == "completed", second
    assert [m["content"] for m in messages if m["type"] == "text"] == ["Second."]
    assert second["output"] == "Second."
    assert second["session_id"] == first["session_id"]
    assert api.main_requests()[-1].n_inputs > api.main_requests()[0].n_inputs


async def test_an_unknown_thread_starts_a_fresh_one(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """A thread the CLI does not know: the run goes on in a fresh thread."""
    gone = "01a219db-0000-7000-8000-000000000000"
    async with app_server_daemon(codex_cli, tmp_path, [Answer("Fresh.")]) as (d, _):
        task = await d.wait(await d.submit("Go.", backend="codex", prior_session_id=gone), 60)
    assert task["status"] == "completed", task
    assert task["session_id"] not in ("", gone)


async def test_the_tasks_skill_reaches_the_app_server_through_its_codex_home(
    codex_cli: InstalledCli,
    tmp_path: Path,
) -> None:
    """The per-task CODEX_HOME holds the task's skill, and the app-server tells the model."""
    marker = "Deploys-with-the-zebra-checklist"
    skills = [{"name": "zebra-deploy", "description": marker, "content": "Use the zebra list."}]
    async with app_server_daemon(codex_cli, tmp_path, [Answer("ok")]) as (d, api):
        created = await d.api.create_task("Deploy it.", backend="codex", agent={"skills": skills})
        task = await d.wait(created["id"], within=60)
    assert task["status"] == "completed", task
    assert any(marker in json.dumps(r.body) for r in api.main_requests())
