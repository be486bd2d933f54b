"""Multica's two progress posts of a task, which its UI shows while the task runs.

`POST /api/daemon/tasks/{id}/progress` with `{"summary", "step", "total"}`, as Multica's
daemon sends them: `Launching <provider>` (1 of 2) once the server acknowledged the start and
before the agent starts, `Finishing task` (2 of 2) once the agent's run ended on its own (not
stopped by the server or a shutdown), before its report. Fire and forget: each goes from a
task group of its own, tried once within `POST_WITHIN`, so a slow or failing server never
holds a task's start, its report or its slot, and a post that fails is only logged.
"""

from __future__ import annotations

import logging

import anyio

from daemon.errors import ServerError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer
from daemon.task.background import Background

log = logging.getLogger(__name__)

STEPS = 2
LAUNCHING = "Launching {provider}"
FINISHING = "Finishing task"
POST_WITHIN = 10.0
"""Seconds one post may take; past it, it is dropped."""


class Progress(Background):
    """Sends the progress posts in the background while `run` holds their task group."""

    def __init__(self, client: TaskServer) -> None:
        super().__init__()
        self._client = client

    def launching(self, task_id: str, provider: str) -> None:
        """The agent is about to start (step 1)."""
        self._post(task_id, LAUNCHING.format(provider=provider), 1)

    def finishing(self, task_id: str) -> None:
        """The agent's run ended; the report follows (step 2)."""
        self._post(task_id, FINISHING, 2)

    def _post(self, task_id: str, summary: str, step: int) -> None:
        if self._tg is not None:  # not serving (a worker shutting down): nothing to show
            self._tg.start_soon(self._send, task_id, summary, step)

    async def _send(self, task_id: str, summary: str, step: int) -> None:
        with anyio.move_on_after(POST_WITHIN) as bounded:
            try:
                await self._client.report_progress(task_id, summary, step, STEPS)
            except ServerError as exc:
                log.debug("task %s: progress %d not sent: %s", short_id(task_id), step, exc)
        if bounded.cancelled_caught:
            shown = short_id(task_id)
            log.debug("task %s: progress %d dropped after %gs", shown, step, POST_WITHIN)
