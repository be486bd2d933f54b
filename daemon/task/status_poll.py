"""The status poll: while a task runs, ask the server now and then whether it is still wanted."""

from __future__ import annotations

import logging
from collections.abc import Callable

from daemon.errors import ServerError, TaskGoneError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer
from daemon.statuses import TERMINAL_STATUSES
from daemon.wakeup import Wakeup

log = logging.getLogger(__name__)


async def poll_status(
    client: TaskServer,
    task_id: str,
    interval: Callable[[], float],
    stop: Callable[[str], None],
    due: Wakeup | None = None,
) -> None:
    """Call `stop` when the server says the task is over or gone; ignore blips.

    `interval()` is asked before each wait (it grows with the daemon's load); setting `due`
    asks at once (the server said the task was cancelled)."""
    due = due or Wakeup()
    while True:
        await due.wait(interval())
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
