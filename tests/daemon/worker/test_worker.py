"""The worker in this process against the fake server: claims into free slots, runs, stops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from backends.scripted import Script, ScriptedBackend
from daemon.config import Settings
from daemon.protocol.models import Task
from daemon.testing import FakeTaskServer, settings_in, task, worker
from daemon.worker.worker import Worker
from tests.helpers import eventually

pytestmark = pytest.mark.anyio

BACKENDS = {"scripted": (ScriptedBackend(), "test")}
HANG = Script().text("busy").hang().dumps()
DONE = Script().result("done").dumps()


@asynccontextmanager
async def serving(server: FakeTaskServer, settings: Settings) -> AsyncIterator[Worker]:
    """A worker running against `server` until the block ends (then stopped gracefully)."""
    w = worker(settings, server, BACKENDS)
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run)
        await eventually(lambda: w.status != "starting")
        yield w
        w.request_stop()


def settled(server: FakeTaskServer, tasks: list[Task]) -> bool:
    return all(server.reports.get(t.id) for t in tasks)


async def test_the_worker_claims_no_more_than_its_free_slots(tmp_path: Path) -> None:
    """With two slots and three tasks queued, a claim asks for two and two run."""
    server = FakeTaskServer()
    server.queue(task(HANG), task(HANG), task(HANG))
    settings = settings_in(tmp_path, MULTICA_DAEMON_MAX_CONCURRENT_TASKS="2")
    async with serving(server, settings) as w:
        await eventually(lambda: len(w.runs) == 2)
        await anyio.sleep(0.3)  # three poll intervals: no slot frees, so nothing more is claimed
        assert server.claims[0] == 2 and server.waiting == 1
        assert len(w.runs) == 2
        w.stop_now()


async def test_a_finished_task_frees_its_slot_for_the_next(tmp_path: Path) -> None:
    """One slot runs three queued tasks one after another, each claim asking for one."""
    server = FakeTaskServer()
    jobs = [task(DONE), task(DONE), task(DONE)]
    server.queue(*jobs)
    settings = settings_in(tmp_path, MULTICA_DAEMON_MAX_CONCURRENT_TASKS="1")
    async with serving(server, settings):
        await eventually(lambda: settled(server, jobs))
    assert [server.reports[j.id][0].kind for j in jobs] == ["complete"] * 3
    assert set(server.claims) == {1}


async def test_each_running_task_holds_the_lowest_free_slot(tmp_path: Path) -> None:
    """Slots are numbered from 0 and a second task takes slot 1."""
    server = FakeTaskServer()
    server.queue(task(HANG), task(HANG))
    async with serving(server, settings_in(tmp_path)) as w:
        await eventually(lambda: len(server.transcripts) == 2)  # both agents run
        assert sorted(r.slot for r in w.runs.values()) == [0, 1]
        w.stop_now()


async def test_without_a_runtime_the_worker_never_claims(tmp_path: Path) -> None:
    """A token serving no workspace registers nothing; the worker stops without a claim."""
    server = FakeTaskServer(workspaces=())
    server.queue(task(DONE))
    w = worker(settings_in(tmp_path), server, BACKENDS)
    with anyio.fail_after(20):
        await w.run()
    assert server.count("claim") == 0 and server.waiting == 1
    assert not w.registered


async def test_stopping_now_cancels_running_tasks_and_reports_them(tmp_path: Path) -> None:
    """The second stage of shutdown fails each running task as cancelled, saying why."""
    server = FakeTaskServer()
    job = task(HANG)
    server.queue(job)
    async with serving(server, settings_in(tmp_path)) as w:
        await eventually(lambda: job.id in server.transcripts)  # its agent runs
        w.stop_now()
    [report] = server.reports[job.id]
    assert (report.kind, report.failure_reason) == ("fail", "cancelled")
    assert "shut down" in report.error
    assert w.summary.counts["cancelled"] == 1


async def test_the_runtimes_are_deregistered_at_shutdown(tmp_path: Path) -> None:
    """A worker that stops tells the server its runtimes are going away."""
    server = FakeTaskServer()
    async with serving(server, settings_in(tmp_path)):
        pass
    assert server.deregistered == ["ws-1/scripted"]


async def test_a_task_claimed_again_while_it_runs_is_refused(tmp_path: Path) -> None:
    """A claim that hands out a running task's id again (in the same claim or a later one)
    starts no second run: one `start`, one run under that id, one ending."""
    server = FakeTaskServer()
    job = task(HANG)
    server.queue(job, job)
    async with serving(server, settings_in(tmp_path)) as w:
        await eventually(lambda: server.count("start_task", job.id) == 1 and server.waiting == 0)
        server.queue(job)
        await eventually(lambda: server.waiting == 0)
        await anyio.sleep(0.3)  # three poll intervals for a second run to show itself
        assert server.count("start_task", job.id) == 1
        assert list(w.runs) == [job.id]
        w.stop_now()
    assert sum(w.summary.counts.values()) == 1
