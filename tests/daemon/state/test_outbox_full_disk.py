"""A full disk under the outbox: the report is kept in memory and retried, the log says so,
no empty temporary file is left, and the daemon keeps running."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest

from daemon.ops.metrics import Metrics
from daemon.state.outbox import Outbox
from tests.daemon.state.test_outbox import (
    FAST,
    SCRIPT,
    claimed_task,
    client_for,
    complete,
    server_and_proxy,
)
from tests.helpers import eventually, full_disk, running_daemon

pytestmark = pytest.mark.anyio

DEPTH = "agent_daemon_outbox_depth"


def files(directory: Path) -> list[str]:
    """What is in the outbox directory, the full disk's filler aside."""
    return sorted(p.name for p in directory.iterdir() if p.name != ".filler")


def test_a_report_that_cannot_be_written_is_kept_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """ENOSPC: `put` says False, leaves no temporary file, counts the report in the depth and
    the metric, keeps it for the next flush, and logs that it is in memory — not on disk."""
    metrics = Metrics()
    with full_disk(tmp_path / "outbox"), caplog.at_level(logging.WARNING):
        outbox = Outbox(tmp_path / "outbox", metrics)
        report = complete("t-1")
        written = outbox.put(report)
        left = files(outbox.directory)
        depth, waiting = outbox.depth(), outbox.reports()
    assert written is False
    assert left == []
    assert depth == 1 and metrics.registry.get_sample_value(DEPTH) == 1
    assert waiting == [report]
    assert (
        "outbox: complete for task t1 could not be written ([Errno 28] No space left on device"
        "): kept in memory, retrying"
    ) in caplog.text
    assert "outbox: kept" not in caplog.text


async def test_a_report_held_in_memory_is_written_once_space_returns(tmp_path: Path) -> None:
    """While the server still fails, the flush after space came back writes the report to disk,
    where a restarted daemon finds it."""
    with full_disk(tmp_path / "outbox") as disk:
        async with server_and_proxy(tmp_path) as (api, proxy), client_for(proxy.url) as client:
            task_id = await claimed_task(api, client)
            outbox = Outbox(tmp_path / "outbox", Metrics())
            assert outbox.put(complete(task_id)) is False
            await proxy.set_mode("500")
            disk.make_room()
            left = await outbox.flush(client)
            on_disk = files(outbox.directory)
            restarted = Outbox(tmp_path / "outbox", Metrics()).reports()
    assert left == 1
    assert len(on_disk) == 1 and on_disk[0].endswith(".json")
    assert [(r.task_id, r.kind) for r in restarted] == [(task_id, "complete")]


async def test_daemon_on_a_full_disk_keeps_running_and_delivers_from_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server fails `complete` and the outbox cannot be written: the daemon keeps running,
    its health document counts the report, and the outbox loop delivers it, once, when the
    server answers again — with the disk still full."""
    outbox_dir = tmp_path / "state" / "outbox"
    with full_disk(outbox_dir), caplog.at_level(logging.INFO):
        async with (
            server_and_proxy(tmp_path) as (api, proxy),
            running_daemon(
                tmp_path, proxy.url, report_policy=FAST, outbox_interval=0.2, health=True
            ) as d,
            httpx.AsyncClient(base_url=d.health_url) as health,
        ):
            await proxy.set_mode("500", only={"complete"})
            task_id = str((await api.create_task(json.dumps(SCRIPT), backend="scripted"))["id"])
            await eventually(lambda: d.worker.outbox.depth() == 1, within=20)
            await eventually(lambda: "kept in memory" in caplog.text)

            async def health_counts_it() -> bool:
                return (await health.get("/health")).json()["outbox_depth"] == 1

            await eventually(health_counts_it)
            left = files(outbox_dir)
            await proxy.set_mode("pass")
            await eventually(lambda: d.worker.outbox.depth() == 0, within=10)
            task = await api.get_task(task_id)
            status = d.worker.status
    assert left == []
    assert status == "running"
    assert task["status"] == "completed" and task["output"] == "the answer"
    assert (task["complete_calls"], task["fail_calls"]) == (1, 0)
    assert "kept in the outbox" not in caplog.text
    assert "could not be written ([Errno 28] No space left on device)" in caplog.text
