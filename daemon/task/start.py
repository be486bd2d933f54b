"""The start acknowledgement: tell the server a claimed task runs, or learn it must not."""

from __future__ import annotations

import logging

from daemon.errors import PermanentServerError, ServerError, TaskGoneError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer
from daemon.task.outcome import Ending

log = logging.getLogger(__name__)


async def acknowledge_start(client: TaskServer, task_id: str) -> Ending | None:
    """Acknowledge the start; the run's ending instead when the task must not run."""
    try:
        await client.start_task(task_id)
    except TaskGoneError:
        return Ending(stopped="gone")
    except PermanentServerError as exc:
        # A start sent again after its answer was lost is refused too: the first one
        # made the task `running`, and only this daemon's start could have.
        if await _running_already(client, task_id):
            return None
        # As Go's `runTask`: the server no longer has the task dispatched (cancelled or
        # reassigned meanwhile), so nothing runs and the task is failed for the record.
        log.warning("task %s: start refused, not running it: %s", short_id(task_id), exc)
        return Ending(error=f"start task failed: {exc}", failure_reason="")
    except ServerError as exc:
        log.warning("task %s: start not acknowledged, running anyway: %s", short_id(task_id), exc)
    return None


async def _running_already(client: TaskServer, task_id: str) -> bool:
    try:
        return await client.task_status(task_id) == "running"
    except ServerError:
        return False
