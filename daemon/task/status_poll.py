"""The status poll: while a task runs, ask the server now and then whether it is still wanted."""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from daemon.errors import ServerError, TaskGoneError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer
from daemon.statuses import TERMINAL_STATUSES

log = logging.getLogger(__name__)


async def poll_status(
    client: TaskServer, task_id: str, interval: float, stop: Callable[[str], None]
) -> None:
    """Call `stop` when the server says the task is over or gone; ignore blips."""
    while True:
        await anyio.sleep(interval)
        try:
            status = await client.task_status(task_id)
        except TaskGoneError:
            log.warning("task %s: server no longer knows it; stopping", short_id(task_id))
            stop("gone")
            return
        except ServerError as exc:
            log.debug("task %s: status poll failed: %s", short_id(task_id), exc)
            continue
        if status in TERMINAL_STATUSES:
            log.warning("task %s: server says %s; stopping", short_id(task_id), status)
            stop("server_cancelled" if status == "cancelled" else "server_terminal")
            return
