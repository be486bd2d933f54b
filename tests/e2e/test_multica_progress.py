"""Multica's two progress posts of a task against the Multica-faithful server: "Launching
<provider>" and "Finishing task", sent beside the run, never holding or failing it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio

LONG = {"steps": [{"emit": {"type": "text", "content": "tick"}}, {"sleep": 0.1}] * 300}
"""A text every 100 ms for half a minute."""


def posts(fake: MulticaFake, task_id: str) -> list[tuple[Any, ...]]:
    """The progress posts the server took for a task, by step."""
    taken = [p for p in fake.progress if p["task_id"] == task_id]
    return sorted((p["step"], p["summary"], p["total"]) for p in taken)


async def test_a_task_posts_launching_and_finishing(tmp_path: Path) -> None:
    """As Multica's daemon: `Launching scripted` (1 of 2), then `Finishing task` (2 of 2)."""
    async with multica_server() as fake, running_daemon(tmp_path, fake.url):
        task_id = fake.queue_issue()
        assert (await fake.finished(task_id, within=20.0)).status == "completed"
        await eventually(lambda: len(posts(fake, task_id)) == 2)
    assert posts(fake, task_id) == [(1, "Launching scripted", 2), (2, "Finishing task", 2)]


async def test_a_slow_or_failing_progress_route_neither_holds_nor_fails_a_task(
    tmp_path: Path,
) -> None:
    """Progress answers held for a minute, then refused with a 500: each task completes all
    the same, long before a held answer would come."""
    async with multica_server() as fake, running_daemon(tmp_path, fake.url):
        fake.slow_answers("progress", 60.0)
        held = fake.queue_issue()
        assert (await fake.finished(held, within=20.0)).status == "completed"
        assert len(posts(fake, held)) == 2  # both were taken; their answers never came
        fake.answer_raw("progress", json.dumps({"error": "boom"}).encode(), status=500)
        refused = fake.queue_issue()
        assert (await fake.finished(refused, within=20.0)).status == "completed"
        await eventually(lambda: len(fake.seen("progress")) == 4)


async def test_a_task_the_server_cancels_is_not_finishing(tmp_path: Path) -> None:
    """A run the server stopped posts only its launch."""
    async with multica_server() as fake, running_daemon(tmp_path, fake.url) as d:
        task_id = fake.queue_chat(json.dumps(LONG))
        await eventually(lambda: len(fake.seen("messages")) >= 1, within=20.0)
        fake.cancel(task_id)
        await eventually(lambda: task_id not in d.worker.runs, within=10.0)
        await eventually(lambda: fake.tasks[task_id].cancel_acks == 1)
    assert posts(fake, task_id) == [(1, "Launching scripted", 2)]
