"""The tasks running now: which claimed tasks may start, the slot each holds, their ends, the
drain at shutdown."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from backends.base import Backend
from daemon.logs import short_id
from daemon.protocol.models import Task
from daemon.services import Services
from daemon.shutdown import ShutdownBudget
from daemon.snapshot import RunSnapshot

if TYPE_CHECKING:
    # The task machinery is imported once the daemon is up (`load`): a daemon registers and
    # claims without it (tests/daemon/test_imports.py).
    from daemon.task.outcome import Outcome
    from daemon.task.run import TaskRun

log = logging.getLogger(__name__)

ENDED_KEPT = 1024
"""How many ended task ids are remembered to refuse a late repeat of their claim."""


class Runs(Mapping[str, "TaskRun"]):
    """The running task runs by task id, each in the lowest slot free when it started."""

    def __init__(
        self, budget: ShutdownBudget, ended: Callable[[TaskRun, Outcome | None], None]
    ) -> None:
        """`ended` hears each run once, after it left: with its outcome, or None when the run
        raised before deciding one."""
        self._running: dict[str, TaskRun] = {}
        # A claim answer sent while a run was still going can arrive after it ended: its id
        # must not start a second run (its start is refused and the fail would follow the
        # complete).
        self._ended_ids: OrderedDict[str, None] = OrderedDict()
        self._budget = budget
        self._ended = ended
        self._idle = anyio.Event()

    def __getitem__(self, task_id: str) -> TaskRun:
        return self._running[task_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._running)

    def __len__(self) -> int:
        return len(self._running)

    def snapshot(self) -> tuple[RunSnapshot, ...]:
        """Each running task now, as plain values for the health port."""
        # A copy of the runs: one that finishes mid-build must not change the tuple.
        return tuple(run.snapshot() for run in list(self._running.values()))

    def transcript_lag(self) -> float:
        """The longest any running task's oldest unsent message has waited, in seconds."""
        return max((run.reporter.transcript.lag() for run in self._running.values()), default=0.0)

    def admit(self, tasks: list[Task], free: int) -> list[Task]:
        """The claimed tasks that may start: each id once, none running or ended here, at most
        `free`. Runs are keyed by task id: a second run of one id would share its work dir,
        its slot count and its reports, and one run's sweep would kill the other's agent."""
        admitted: dict[str, Task] = {}
        for task in tasks:
            if task.id in self._running or task.id in admitted:
                log.warning("task %s: claimed again while it runs: refused", short_id(task.id))
            elif task.id in self._ended_ids:
                log.warning(
                    "task %s: claimed again after its run ended: refused", short_id(task.id)
                )
            elif len(admitted) >= free:
                log.warning(
                    "task %s: the claim brought more than the %d tasks asked for: refused",
                    short_id(task.id),
                    free,
                )
            else:
                admitted[task.id] = task
        return list(admitted.values())

    async def load(self) -> None:
        """Import the task machinery in a worker thread, once the daemon is up: its first
        claim does not wait for it, and an install broken (or upgraded in place) under it
        stops the daemon at start-up, not at its first task."""
        await anyio.to_thread.run_sync(_import_task_machinery)

    def launch(self, group: TaskGroup, task: Task, backend: Backend, services: Services) -> None:
        """Start `task` on `backend` in `group`, in the lowest free slot, with the `services`
        the worker holds now."""
        from daemon.task.run import TaskRun  # loaded by `load`, or waited for here

        run = TaskRun(task, backend, self._free_slot(), services)
        self._running[task.id] = run
        services.metrics.tasks_claimed.labels(backend.name).inc()
        log.info("task %s: claimed backend=%s", short_id(task.id), backend.name)
        self._idle = anyio.Event()
        group.start_soon(self._run_one, run, name=f"task {short_id(task.id)}")

    def stop(self) -> None:
        """Cancel every running task now; the budget goes to its last stage first, so each
        cancelled task's report gets only its short allowance."""
        self._budget.stop()
        for run in list(self._running.values()):
            run.stop("shutdown")

    async def drain(self, grace: float) -> None:
        """Let running tasks finish within the shutdown `grace`, then cancel the rest."""
        if not self._running:
            return
        log.info("waiting up to %ss for %d running tasks", grace, len(self._running))
        with anyio.move_on_after(grace):
            await self._idle.wait()
        if self._running:
            log.warning("shutdown grace over: cancelling %d tasks", len(self._running))
            self.stop()

    def _free_slot(self) -> int:
        """The lowest slot no running task holds (Multica's `MULTICA_TASK_SLOT`, from 0)."""
        taken = {r.slot for r in self._running.values()}
        return next(n for n in range(len(taken) + 1) if n not in taken)

    async def _run_one(self, run: TaskRun) -> None:
        outcome: Outcome | None = None
        try:
            outcome = await run.run()
        except Exception:
            # `run` fails its own task on any error; this guards the rest of the daemon from a
            # defect in that very path (deciding or reporting), which must not end the runs' group.
            log.exception("task %s: run ended by an unexpected error", run.id)
        finally:
            self._running.pop(run.task.id, None)
            self._ended_ids[run.task.id] = None
            if len(self._ended_ids) > ENDED_KEPT:
                self._ended_ids.popitem(last=False)
            self._ended(run, outcome)
            if not self._running:
                self._idle.set()


def _import_task_machinery() -> None:
    import daemon.task.run  # noqa: F401  (a statement: `-X importtime` shows it, tests read that)
