"""A task group held open while the daemon serves, for work sent off to run beside it."""

from __future__ import annotations

import anyio
from anyio.abc import TaskGroup, TaskStatus


class Background:
    """Holds a task group while `run` runs (started with `TaskGroup.start`); subclasses
    hand it fire-and-forget work through `_tg`, which is None when not serving."""

    def __init__(self) -> None:
        self._tg: TaskGroup | None = None

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the task group the work runs in; until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None
