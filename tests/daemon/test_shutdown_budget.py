"""The shutdown budget: each owner's scope keeps its own deadline until the stage calls for less."""

from __future__ import annotations

import math

import anyio
import pytest

from daemon.shutdown import CLAIM, REPORT, REPORT_CALL, ShutdownBudget, Stage
from daemon.testing import FakeClock

pytestmark = pytest.mark.anyio


def test_steps_are_unbounded_until_their_stage() -> None:
    """While running nothing is cut; draining cuts claims and report calls; stopping cuts all."""
    clock = FakeClock(100.0)
    budget = ShutdownBudget(clock)
    assert budget.cutoff(CLAIM) == budget.cutoff(REPORT) == math.inf
    budget.drain()
    assert budget.stage is Stage.DRAINING and not budget.stopping
    assert budget.cutoff(CLAIM) == 101.0
    assert budget.cutoff(REPORT_CALL) == 103.0
    assert budget.cutoff(REPORT) == math.inf
    budget.stop()
    assert budget.stopping
    assert budget.cutoff(REPORT) == 103.0


def test_stages_only_move_forward() -> None:
    """Draining after stopping leaves the daemon stopping."""
    budget = ShutdownBudget()
    budget.stop()
    budget.drain()
    assert budget.stage is Stage.STOPPING


async def test_a_scope_entered_while_running_is_cut_at_the_stage_change() -> None:
    """An owner's scope keeps its long deadline while running and gets the step's allowance
    from the moment the stage it belongs to begins."""
    budget = ShutdownBudget()
    with anyio.CancelScope() as scope, budget.bounding(scope, REPORT):
        await anyio.lowlevel.checkpoint()
        assert scope.deadline == math.inf
        budget.drain()
        assert scope.deadline == math.inf  # a report's own scope waits for the second stage
        budget.stop()
        assert anyio.current_time() < scope.deadline <= anyio.current_time() + REPORT.within


async def test_a_scope_entered_late_starts_short_and_is_forgotten_on_exit() -> None:
    """A scope entered after its stage began is bounded from the start; once left, later stage
    changes no longer touch it."""
    budget = ShutdownBudget()
    budget.drain()
    with anyio.CancelScope(deadline=anyio.current_time() + 600) as claim:
        with budget.bounding(claim, CLAIM):
            assert claim.deadline <= anyio.current_time() + CLAIM.within
            await anyio.lowlevel.checkpoint()
    with anyio.CancelScope() as report:
        with budget.bounding(report, REPORT):
            await anyio.lowlevel.checkpoint()
        budget.stop()
        assert report.deadline == math.inf
