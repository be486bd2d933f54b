"""Copilot through the whole daemon, with a stand-in `copilot` printing the CLI's events
(tests/fakes/copilot_cli.py): a long tool under a short idle window, stalls, and nothing left
running after them."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from backends.process import TRACKING_ENV, tagged
from tests.fakes.copilot_cli import SESSION, answer, result, shell, shell_done, turn, write_copilot
from tests.helpers import RunningDaemon, cli_daemon, incidents

pytestmark = pytest.mark.anyio

WINDOW = 4.0


@asynccontextmanager
async def copilot_daemon(
    tmp_path: Path, steps: Sequence[str | float]
) -> AsyncIterator[RunningDaemon]:
    """A daemon whose only backend is the stand-in Copilot, under a 4 s idle window."""
    cli = write_copilot(tmp_path / "copilot", steps)
    agent_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")}
    async with cli_daemon(
        tmp_path, agent_env, MULTICA_COPILOT_PATH=str(cli), MULTICA_AGENT_IDLE_WATCHDOG=f"{WINDOW}s"
    ) as d:
        yield d


async def test_a_tool_longer_than_the_window_completes(tmp_path: Path) -> None:
    """A 10 s tool under a 4 s window is in flight from its start: no watchdog fires, the
    task completes with the answer and the session, the call and its result in the transcript."""
    steps = [
        turn(0),
        *shell("c1", "sleep 10"),
        10.0,
        shell_done("c1", "slept"),
        turn(1),
        answer("Slept."),
        result(),
    ]
    async with copilot_daemon(tmp_path, steps) as d:
        task = await d.wait(await d.submit("Sleep.", backend="copilot"), within=60)
        messages = await d.api.messages(task["id"])
        records = incidents(d)
    assert task["status"] == "completed", task
    assert (task["output"], task["session_id"]) == ("Slept.", SESSION)
    (use,) = [m for m in messages if m["type"] == "tool_use"]
    (done,) = [m for m in messages if m["type"] == "tool_result"]
    assert use["tool"] == "bash" and done["output"] == "slept"
    assert records == []


@pytest.mark.parametrize("where", ["after-first-words", "after-a-tool"])
async def test_a_stall_is_stopped_by_the_watchdog(tmp_path: Path, where: str) -> None:
    """The CLI goes silent (after its first words, or after a tool ended): idle_watchdog
    after about the window, and no process of the task survives."""
    before = [turn(0), answer("Working on it")]
    if where == "after-a-tool":
        before = [turn(0), *shell("c1", "true"), shell_done("c1", ""), turn(1)]
    async with copilot_daemon(tmp_path, [*before, 300.0, result()]) as d:
        task_id = await d.submit("Do it.", backend="copilot")
        task = await d.wait(task_id, within=60)
        (record,) = incidents(d)
    assert task["failure_reason"] == "idle_watchdog", task
    assert tagged(TRACKING_ENV, task_id) == []
    assert record["scope"] == "idle"
    assert WINDOW <= record["idle_seconds"] <= WINDOW + 3
