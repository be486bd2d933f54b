"""The status poll: while a task runs, ask the server now and then whether it is still wanted.

This project's server also names the task's status on every transcript answer
(`X-Task-Status`); `StatusNews` keeps what it said, so a task whose transcript flows needs no
polls of its own and a finished status stops the run at once. Multica names nothing there, so
against it every poll is made, as its own daemon makes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from daemon.errors import ServerError, TaskGoneError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer
from daemon.protocol.models import TERMINAL_STATUSES
from daemon.protocol.pacing import Beat
from daemon.wakeup import Wakeup

log = logging.getLogger(__name__)


class StatusNews:
    """The task's status as the server last named it in an answer to another call."""

    def __init__(self, due: Wakeup, clock: Callable[[], float] = anyio.current_time) -> None:
        """`due` is the poll's alarm: a finished status sets it. `clock` is the one the poll
        waits by (the event loop's)."""
        self._due = due
        self._clock = clock
        self._told: tuple[float, str] | None = None

    def heard(self, status: str) -> None:
        """The server named the task's status just now."""
        self._told = (self._clock(), status)
        if status in TERMINAL_STATUSES:
            self._due.set()

    def within(self, seconds: float) -> str | None:
        """The status named in the last `seconds`, if one was."""
        if self._told is None or self._clock() - self._told[0] > seconds:
            return None
        return self._told[1]


async def poll_status(
    client: TaskServer,
    task_id: str,
    beat: Beat,
    stop: Callable[[str], None],
    due: Wakeup | None = None,
    news: StatusNews | None = None,
) -> None:
    """Call `stop` when the server says the task is over or gone; ignore blips.

    The wait ends on the task's `beat` (pacing.py; its interval grows with the daemon's
    load); setting `due` asks at once (the server said the task was cancelled). A status in
    `news` from within the last interval stands in for a poll, unless `due` was set and it does
    not say the task is over."""
    due = due or Wakeup()
    while True:
        every = beat.interval()
        # At least half an interval: a task that just started is not polled before its first
        # transcript answer (every 0.5 s) could name its status.
        woken = await due.wait(beat.wait(every, at_least=every / 2))
        told = news.within(every) if news is not None else None
        if told is not None and (told in TERMINAL_STATUSES or not woken):
            status = told
        else:
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
