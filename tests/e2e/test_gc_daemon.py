"""GC rounds of a running daemon against Multica's gc-check (the faithful fake) and the
embedded server's: done work goes, open and running work stays, nothing else waits on it."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from daemon.cli.status_view import render
from daemon.config import Settings
from daemon.ops.metrics import Metrics
from daemon.workdirs.gc_loop import GcLoop, policy_of
from daemon.workdirs.gc_meta import read_meta
from daemon.workdirs.gc_stats import GcStats
from daemon.workdirs.names import task_key
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import RunningDaemon, embedded_server, eventually, running_daemon

pytestmark = pytest.mark.anyio

HANG = json.dumps({"steps": [{"text": "working"}, {"hang": True}]})


def _gc(d: RunningDaemon, *, later: float = 0.0) -> GcLoop:
    """A GC loop over the daemon's root and leases, its clock `later` seconds ahead."""
    worker = d.worker
    now = lambda: datetime.now(UTC) + timedelta(seconds=later)  # noqa: E731
    return GcLoop(d.settings, worker.client, worker.services.leases, Metrics(), now=now)


async def _done(fake: MulticaFake, task_id: str, root: Path) -> Path:
    """The finished task's dir, once its meta is written."""
    await eventually(lambda: fake.tasks[task_id].status == "completed", within=30)
    env_root = Path(fake.tasks[task_id].work_dir).parent
    await eventually(lambda: read_meta(env_root) is not None)
    return env_root


async def test_multica_done_issue_goes_open_and_running_stay(tmp_path: Path) -> None:
    """Against Multica's gc-check: a done issue's dir is removed; an open issue's dir and a
    running task's dir (of that same done issue) stay; one batch asks for both issues."""
    done_issue, open_issue = str(uuid.uuid4()), str(uuid.uuid4())
    root = tmp_path / "workspaces"
    async with multica_server() as fake, running_daemon(tmp_path, fake.url) as d:
        first = fake.queue_issue(done_issue)
        second = fake.queue_issue(open_issue)
        gone, kept = await _done(fake, first, root), await _done(fake, second, root)
        running = fake.queue_comment(HANG, issue_id=done_issue)
        await eventually(lambda: fake.tasks[running].status == "running", within=30)
        busy = next(p for p in (root / fake.workspace_id).iterdir() if p.name == task_key(running))
        long_ago = datetime.now(UTC) - timedelta(days=2)
        fake.set_issue(done_issue, "done", long_ago)
        fake.set_issue(open_issue, "in_progress", long_ago)
        stats = await _gc(d).round()
        fake.cancel(running)
        await eventually(lambda: running not in d.worker.runs, within=30)
    assert stats is not None and stats.cleaned == 1
    assert not gone.exists()
    assert kept.exists() and busy.exists()
    (batch,) = [r for r in fake.seen("gc-check") if r.path.endswith("/issues/gc-check")]
    assert batch.path == f"/api/daemon/workspaces/{fake.workspace_id}/issues/gc-check"
    assert sorted(batch.body["issue_ids"]) == sorted([done_issue, open_issue])
    meta = read_meta(kept)
    assert meta is not None and (meta.kind, meta.issue_id) == ("issue", open_issue)


async def test_an_older_multica_gets_the_per_issue_route(tmp_path: Path) -> None:
    """A server without the batch route (a router's 404) is asked issue by issue from then on."""
    issue = str(uuid.uuid4())
    root = tmp_path / "workspaces"
    async with multica_server() as fake, running_daemon(tmp_path, fake.url) as d:
        fake.batch_gc_unsupported = True
        gone = await _done(fake, fake.queue_issue(issue), root)
        fake.set_issue(issue, "cancelled", datetime.now(UTC) - timedelta(days=2))
        loop = _gc(d)
        await loop.round()
        await loop.round()
    assert not gone.exists()
    paths = [r.path for r in fake.seen("gc-check")]
    assert paths.count(f"/api/daemon/workspaces/{fake.workspace_id}/issues/gc-check") == 1
    assert f"/api/daemon/issues/{issue}/gc-check" in paths


async def test_a_failed_gc_check_keeps_everything_and_the_daemon_runs_on(tmp_path: Path) -> None:
    """The batch is refused (a JSON 404: the workspace is not the token's to see): the round
    keeps every dir, and the daemon goes on claiming and running tasks."""
    issue = str(uuid.uuid4())
    root = tmp_path / "workspaces"
    async with multica_server() as fake, running_daemon(tmp_path, fake.url) as d:
        kept = await _done(fake, fake.queue_issue(issue), root)
        fake.set_issue(issue, "done", datetime.now(UTC) - timedelta(days=2))
        fake.workspaces.clear()  # the batch now answers 404 workspace not found (JSON)
        stats = await _gc(d).round()
        assert stats is not None and stats.cleaned == 0
        assert kept.exists()
        fake.workspaces[d.worker.registration.workspaces[0]["id"]] = "Main"
        after = fake.queue_issue(str(uuid.uuid4()))
        await _done(fake, after, root)


async def test_embedded_server_tasks_go_after_the_ttl(tmp_path: Path) -> None:
    """The embedded server answers gc-check: a finished task's dir stays within the TTL and
    goes past it; a running task's dir stays; the root's sizes reach the metrics and status."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(tmp_path, url, health=True) as d,
    ):
        finished = await d.wait(await d.submit("quick"))
        running = await d.submit(HANG)
        await eventually(
            lambda: (
                running in d.worker.runs
                and d.worker.runs[running].snapshot().attempt.pid is not None
            ),
            within=30,
        )
        env_root = Path(finished["work_dir"]).parent
        await eventually(lambda: read_meta(env_root) is not None)
        now = _gc(d)
        await now.round()
        assert env_root.exists()
        later = _gc(d, later=25 * 3600)
        stats = await later.round()
        busy = env_root.parent / task_key(running)
        assert stats is not None and stats.cleaned == 1
        assert not env_root.exists() and busy.exists()
        assert later.disk is not None and later.disk.task_dirs == 1
        await d.worker.gc.round()  # the daemon's own loop: what status and metrics show
        doc: dict[str, Any] = {}
        async with httpx.AsyncClient(base_url=d.health_url) as probe:
            # The health port publishes what its loop's last tick saw.
            async def measured() -> bool:
                doc.update((await probe.get("/health")).json())
                return doc.get("disk") is not None

            await eventually(measured)
        await d.cancel(running)
    assert doc["disk"]["task_dirs"] == 1 and doc["disk"]["task_bytes"] > 0
    assert "disk       1 task dirs" in render(doc)
    scrape = d.metrics.exposition().decode()
    assert 'agent_daemon_workdir_bytes{part="tasks"}' in scrape
    assert 'agent_daemon_gc_rounds_total{outcome="ok"} 1.0' in scrape


class _HeldRound:
    """A round that lasts until the test lets it go, then fails once it is told to."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.released = False
        self.fail = False
        self.policy = policy_of(Settings.from_env({"HOME": "/nonexistent"}))

    def run_round(self) -> GcStats:
        if self.fail:
            raise OSError("disk went away")
        self.released = self.go.wait(20)
        return GcStats()


async def test_a_round_never_holds_claims_and_an_error_costs_one_round(tmp_path: Path) -> None:
    """While a round is in progress a task is claimed, run and reported; a round that raises
    is logged and counted, and the next one runs."""
    async with embedded_server(tmp_path / "server.db") as url, running_daemon(tmp_path, url) as d:
        loop = _gc(d)
        held = _HeldRound()
        loop.collector = held  # type: ignore[assignment]
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop.round)
            task = await d.wait(await d.submit("while the GC walks"), within=20)
            held.go.set()
        assert task["status"] == "completed"
        assert held.released, "the round ran on the event loop: the task could not finish"
        held.fail = True
        assert await loop.round() is None
        held.fail = False
        assert await loop.round() is not None
    scrape = loop.metrics.exposition().decode()
    assert 'agent_daemon_gc_rounds_total{outcome="error"} 1.0' in scrape
