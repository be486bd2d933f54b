"""When the claim loop claims: at its poll interval, or at once when told that a task waits.

An embedded server in this process calls `task_queued` / `task_cancelled` directly (it holds
this object through its `ControlHub`); a separate server says so over Multica's control
WebSocket (daemon/protocol/control.py), which also carries the runtimes' heartbeats and the
claims themselves (`channel.calls`). Either only brings the next claim forward: the poll
interval stays the fallback, so a lost wakeup costs at most one poll.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

import anyio

import daemon
from daemon.config import Settings
from daemon.ops.metrics import Metrics
from daemon.protocol.control import ChannelTiming, ControlChannel
from daemon.protocol.control_frames import PushHandler, SocketBeats
from daemon.protocol.models import Task
from daemon.protocol.wire import protocol_headers
from daemon.wakeup import Wakeup
from daemon.worker.registration import Registration

if TYPE_CHECKING:
    from daemon.task.run import TaskRun  # imported once the daemon is up (runs.py)


class Pickup:
    """The claim loop's alarm, set by the server's news, a freed slot or a stop request."""

    def __init__(
        self,
        settings: Settings,
        runs: Mapping[str, TaskRun],
        registration: Registration,
        server_url: str,
        control: bool,
        pushes: PushHandler | None = None,
        beats: SocketBeats | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`control`: open the server's control WebSocket (a server in another process), whose
        other pushes go to `pushes` and heartbeat acks to `beats`."""
        self._settings = settings
        self._runs = runs
        self.wakeup = Wakeup()
        self.channel: ControlChannel | None = None
        if control:
            headers = protocol_headers(settings.token, daemon.__version__)
            self.channel = ControlChannel(
                server_url,
                headers,
                registration.runtime_ids,
                self.wakeup,
                timing=ChannelTiming(heartbeat_interval=settings.heartbeat_interval),
                pushes=pushes,
                beats=beats,
                metrics=metrics,
            )
        self._registration = registration

    async def listen(self) -> None:
        """Keep the control channel open (when the server is separate), reopened for each new
        set of runtimes; until cancelled."""
        if self.channel is None:
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._follow_runtimes)
            await self.channel.run()

    async def _follow_runtimes(self) -> None:
        while True:
            await self._registration.wait_changed()
            self.runtimes_changed()

    async def wait(self, at_most: float = math.inf) -> None:
        """Until woken, or one poll interval (jittered so daemons do not claim in step), or
        `at_most` seconds when that is sooner."""
        poll = self._settings.poll_interval * random.uniform(0.8, 1.2)
        await self.wakeup.wait(min(poll, at_most))

    def wake(self) -> None:
        """Claim again now (a slot freed, the daemon is stopping)."""
        self.wakeup.set()

    def claimed(self, tasks: list[Task]) -> list[Task]:
        """The tasks a claim brought; when there were any, the next claim comes at once, as a
        server hands out only a few a claim (Multica at most 32) and may hold more."""
        if tasks:
            self.wakeup.set()
        return tasks

    def runtimes_changed(self) -> None:
        """The daemon registered again: the control channel reopens for the new runtimes."""
        if self.channel is not None:
            self.channel.runtimes_changed()

    def task_queued(self, task_id: str) -> None:
        """The server queued a task one of our runtimes may serve: claim now, not at the poll."""
        self.wakeup.set()

    def task_cancelled(self, task_id: str) -> None:
        """The server cancelled a task: its run checks the status now, not at its next poll."""
        run = self._runs.get(task_id)
        if run is not None:
            run.check_status()
