"""The real Codex CLI through the whole daemon, against a fake OpenAI Responses API.

Skipped, with the install command as the reason, only when the CLI is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.process import TRACKING_ENV, tagged
from tests.e2e.codex_support import codex_daemon
from tests.fakes.openai_api import Answer, Shell, Stall
from tests.fakes.real_cli import ON_EVERY_CODEX_PIN, InstalledCli
from tests.helpers import incidents

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


@ON_EVERY_CODEX_PIN
async def test_plain_answer_completes_with_output_and_thread(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """A plain answer completes with the answer as output and the thread id recorded."""
    async with codex_daemon(codex_cli, tmp_path, [Answer("All done here.")]) as (d, _):
        task = await d.wait(await d.submit("Do it.", backend="codex"), within=60)
    assert task["status"] == "completed", task
    assert task["output"] == "All done here."
    assert task["session_id"]


@ON_EVERY_CODEX_PIN
async def test_shell_command_longer_than_the_window_completes(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """A shell command running 2× the idle window is a tool in flight, not idleness."""
    script = [Shell("sleep 4 && echo slept"), Answer("Slept.")]
    async with codex_daemon(codex_cli, tmp_path, script, window="2s") as (d, _):
        task = await d.wait(await d.submit("Sleep.", backend="codex"), within=90)
        messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    (use,) = [m for m in messages if m["type"] == "tool_use"]
    (done,) = [m for m in messages if m["type"] == "tool_result"]
    assert done["tool"] == use["tool"] != "" and "slept" in done["output"]
    assert incidents(d) == []


@ON_EVERY_CODEX_PIN
async def test_stalled_api_is_stopped_by_the_watchdog(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """The API accepts the request and sends nothing: idle_watchdog, no process survives."""
    async with codex_daemon(codex_cli, tmp_path, [Stall()], window="2s") as (d, _):
        task_id = await d.submit("Do it.", backend="codex")
        task = await d.wait(task_id, within=90)
        records = incidents(d)
    assert task["failure_reason"] == "idle_watchdog", task
    assert tagged(TRACKING_ENV, task_id) == []
    (record,) = records
    assert record["scope"] in ("idle", "first_output")
    assert 2.0 <= record["idle_seconds"] <= 3.5


async def test_second_task_resumes_the_first_thread(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """A task with prior_session_id resumes that thread."""
    async with codex_daemon(codex_cli, tmp_path, [Answer("First."), Answer("Second.")]) as (d, api):
        first = await d.wait(await d.submit("One.", backend="codex"), within=60)
        second_id = await d.submit("Two.", backend="codex", prior_session_id=first["session_id"])
        second = await d.wait(second_id, within=60)
    assert second["status"] == "completed", second
    assert second["output"] == "Second."
    assert second["session_id"] == first["session_id"]
    assert len(api.requests) >= 2


async def test_the_tasks_skill_reaches_the_real_codex(
    codex_cli: InstalledCli, tmp_path: Path
) -> None:
    """An inline skill of the task is in the per-task CODEX_HOME, and Codex tells the model
    about it: the skill's description is in the request the API receives."""
    marker = "Deploys-with-the-zebra-checklist"
    skills = [{"name": "zebra-deploy", "description": marker, "content": "Use the zebra list."}]
    async with codex_daemon(codex_cli, tmp_path, [Answer("ok")]) as (d, api):
        created = await d.api.create_task("Deploy it.", backend="codex", agent={"skills": skills})
        task = await d.wait(created["id"], within=60)
    assert task["status"] == "completed", task
    assert any(marker in json.dumps(r.body) for r in api.main_requests())
