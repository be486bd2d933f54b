"""The running tasks: admitted up to the free slots, each in the lowest free slot, each end
heard once, drained at shutdown."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from backends.scripted import Script, ScriptedBackend
from daemon.logs import short_id
from daemon.services import Services
from daemon.shutdown import ShutdownBudget, Stage
from daemon.task.outcome import Outcome
from daemon.task.run import TaskRun
from daemon.testing import FakeTaskServer, services, settings_in, task
from daemon.worker.runs import Runs
from tests.helpers import eventually

pytestmark = pytest.mark.anyio

BACKEND = ScriptedBackend()
HANG = Script().text("busy").hang().dumps()
DONE = Script().result("done").dumps()


class Ended:
    """What a `Runs` told of each run that left: its task id and outcome, in order."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, Outcome | None]] = []

    def __call__(self, run: TaskRun, outcome: Outcome | None) -> None:
        self.heard.append((run.task.id, outcome))

    def ids(self) -> list[str]:
        return [task_id for task_id, _ in self.heard]


def shared(tmp_path: Path, server: FakeTaskServer, budget: ShutdownBudget) -> Services:
    return services(settings_in(tmp_path), server, budget=budget)


def test_a_claim_is_admitted_up_to_the_slots_it_asked_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Of a claim, each id starts once and no more tasks than were asked for; each refusal
    is logged with its reason."""
    runs = Runs(ShutdownBudget(), Ended())
    a, b, c = task(), task(), task()
    with caplog.at_level(logging.WARNING, logger="daemon.worker.runs"):
        assert runs.admit([a, a, b, c], 2) == [a, b]
    assert [r.getMessage() for r in caplog.records] == [
        f"task {short_id(a.id)}: claimed again while it runs: refused",
        f"task {short_id(c.id)}: the claim brought more than the 2 tasks asked for: refused",
    ]
    assert runs.admit([a, b], 0) == []


async def test_a_task_already_running_is_not_admitted_again(tmp_path: Path) -> None:
    """A claim that hands out a running task's id admits only the others."""
    budget, server = ShutdownBudget(), FakeTaskServer()
    runs = Runs(budget, Ended())
    running, other = task(HANG), task(HANG)
    async with anyio.create_task_group() as group:
        runs.launch(group, running, BACKEND, shared(tmp_path, server, budget))
        assert runs.admit([running, other], 2) == [other]
        runs.stop()
    assert list(runs) == []


async def test_a_task_whose_run_ended_is_not_admitted_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A claim answer sent while a run went on can arrive after it ended: that id starts no
    second run (whose refused start would report a fail after the complete)."""
    budget, server = ShutdownBudget(), FakeTaskServer()
    runs = Runs(budget, Ended())
    job, other = task(DONE), task(DONE)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            runs.launch(group, job, BACKEND, shared(tmp_path, server, budget))
    assert job.id not in runs
    with caplog.at_level(logging.WARNING, logger="daemon.worker.runs"):
        assert runs.admit([job, other], 2) == [other]
    assert [r.getMessage() for r in caplog.records] == [
        f"task {short_id(job.id)}: claimed again after its run ended: refused"
    ]


async def test_a_finished_run_frees_its_slot_once_and_the_lowest_is_taken_next(
    tmp_path: Path,
) -> None:
    """Slots count from 0; a run that ends is heard once and leaves its slot to the next run."""
    budget, server, ended = ShutdownBudget(), FakeTaskServer(), Ended()
    runs = Runs(budget, ended)
    first, second, third = task(HANG), task(HANG), task(HANG)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            shares = shared(tmp_path, server, budget)
            runs.launch(group, first, BACKEND, shares)
            runs.launch(group, second, BACKEND, shares)
            assert {runs[first.id].slot, runs[second.id].slot} == {0, 1}
            assert runs[first.id].slot == 0
            runs[first.id].stop("server_cancelled")
            await eventually(lambda: first.id not in runs)
            assert ended.ids() == [first.id]
            runs.launch(group, third, BACKEND, shares)
            assert runs[third.id].slot == 0 and runs[second.id].slot == 1
            runs.stop()
    assert sorted(ended.ids()) == sorted([first.id, second.id, third.id])
    assert len(runs) == 0


async def test_a_completed_run_is_heard_with_its_outcome(tmp_path: Path) -> None:
    """A run that completes leaves the running set and is heard once, with its outcome."""
    budget, server, ended = ShutdownBudget(), FakeTaskServer(), Ended()
    runs = Runs(budget, ended)
    job = task(DONE)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            runs.launch(group, job, BACKEND, shared(tmp_path, server, budget))
    [(task_id, outcome)] = ended.heard
    assert task_id == job.id and outcome is not None
    assert outcome.status.value == "completed"
    assert job.id not in runs


async def test_draining_waits_for_runs_that_finish_within_the_grace(tmp_path: Path) -> None:
    """Runs that end within the grace end as they would; nothing is cancelled."""
    budget, server, ended = ShutdownBudget(), FakeTaskServer(), Ended()
    runs = Runs(budget, ended)
    jobs = [task(Script().sleep(0.2).result("done").dumps()) for _ in range(2)]
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            shares = shared(tmp_path, server, budget)
            for job in jobs:
                runs.launch(group, job, BACKEND, shares)
            await runs.drain(grace=25)
            assert len(runs) == 0
    assert budget.stage is Stage.RUNNING
    assert [server.reports[j.id][0].kind for j in jobs] == ["complete", "complete"]


async def test_draining_cancels_what_still_runs_when_the_grace_is_over(tmp_path: Path) -> None:
    """Past the grace the budget reaches its last stage and each run is cancelled, reported."""
    budget, server, ended = ShutdownBudget(), FakeTaskServer(), Ended()
    runs = Runs(budget, ended)
    jobs = [task(HANG), task(HANG)]
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            shares = shared(tmp_path, server, budget)
            for job in jobs:
                runs.launch(group, job, BACKEND, shares)
            await eventually(lambda: all(j.id in server.transcripts for j in jobs))
            await runs.drain(grace=0.1)
            assert budget.stopping
    assert sorted(ended.ids()) == sorted(j.id for j in jobs)
    for job in jobs:
        [report] = server.reports[job.id]
        assert (report.kind, report.failure_reason) == ("fail", "cancelled")


async def test_draining_nothing_returns_at_once() -> None:
    """With no run, the drain neither waits for the grace nor advances the budget."""
    budget = ShutdownBudget()
    with anyio.fail_after(1):
        await Runs(budget, Ended()).drain(grace=60)
    assert budget.stage is Stage.RUNNING


async def test_the_snapshot_shows_each_running_task(tmp_path: Path) -> None:
    """The health port's view lists the runs running now, and none that ended."""
    budget, server = ShutdownBudget(), FakeTaskServer()
    runs = Runs(budget, Ended())
    a, b = task(HANG), task(HANG)
    assert runs.snapshot() == ()
    async with anyio.create_task_group() as group:
        shares = shared(tmp_path, server, budget)
        for job in (a, b):
            runs.launch(group, job, BACKEND, shares)
        assert sorted(s.id for s in runs.snapshot()) == sorted([a.id, b.id])
        runs[a.id].stop("server_cancelled")
        await eventually(lambda: a.id not in runs)
        assert [s.id for s in runs.snapshot()] == [b.id]
        runs.stop()
