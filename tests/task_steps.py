"""Counting how often tasks wake: a trio instrument, for tests run on anyio's trio backend."""

from __future__ import annotations

import trio


class TaskSteps(trio.abc.Instrument):
    """Counts the task steps trio runs while added (`trio.lowlevel.add_instrument`): each
    step is one task woken."""

    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        del task
        self.steps += 1
