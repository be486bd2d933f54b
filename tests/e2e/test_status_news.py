"""A running task's status from its transcript answers: this project's server names it on each
one (`X-Task-Status`), so a task whose transcript flows needs no status polls, and a cancel is
heard with the next batch. Multica names nothing there: against it every poll is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.multica_server import multica_server
from tests.helpers import RunningDaemon, embedded_server, eventually, running_daemon

pytestmark = pytest.mark.anyio

CHATTY = {"steps": [{"emit": {"type": "text", "content": "tick"}}, {"sleep": 0.1}] * 300}
"""A text every 100 ms for half a minute: the transcript goes out with every batch."""


def requests_to(daemon: RunningDaemon, endpoint: str) -> float:
    """The daemon's answered requests to one endpoint so far."""
    value = daemon.metrics.registry.get_sample_value(
        "agent_daemon_server_requests_total", {"endpoint": endpoint, "outcome": "ok"}
    )
    return float(value or 0)


async def test_a_talking_task_needs_no_status_polls(tmp_path: Path) -> None:
    """Each poll interval (2 s) sees transcript answers (every 500 ms) naming the status."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(tmp_path, url, MULTICA_DAEMON_STATUS_POLL_INTERVAL="2s") as d,
    ):
        task_id = await d.submit(CHATTY)
        await eventually(lambda: requests_to(d, "messages") >= 8, within=20)
        assert requests_to(d, "status") == 0
        task = await d.cancel(task_id)
    assert task["status"] == "cancelled"


async def test_a_cancel_is_heard_with_the_next_transcript_batch(tmp_path: Path) -> None:
    """With status polls an hour apart, the transcript's answer alone stops the run."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(tmp_path, url, MULTICA_DAEMON_STATUS_POLL_INTERVAL="1h") as d,
    ):
        task_id = await d.submit(CHATTY)
        await eventually(lambda: requests_to(d, "messages") >= 1, within=15)  # it runs
        task = await d.cancel(task_id)
    assert task["status"] == "cancelled"
    assert task["cancel_acked"]


async def test_against_multica_every_status_poll_is_made(tmp_path: Path) -> None:
    """Multica's transcript answer names no status, so polls go on while the task talks."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, MULTICA_DAEMON_STATUS_POLL_INTERVAL="200ms") as d,
    ):
        task_id = fake.queue_chat(json.dumps(CHATTY))
        await eventually(lambda: len(fake.seen("messages")) >= 4, within=20)
        await eventually(lambda: len(fake.seen("status")) >= 8, within=10)
        fake.cancel(task_id)
        await eventually(lambda: task_id not in d.worker.runs, within=10)
