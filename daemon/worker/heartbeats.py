"""The runtimes' heartbeats: one HTTP loop per runtime, each on its own schedule, which stays
quiet while the control WebSocket carries that runtime's heartbeats; the one beat they share
with a heartbeat the server asks for (`pushes.py`); each answer's pending actions started as
they come, whichever way it came.

As Multica's daemon does (`runHeartbeatTick`, `wsHeartbeatRecentlyAcked`): an HTTP tick is
skipped while the runtime's last ack on the socket is under two heartbeat intervals old, so
one lost ack costs nothing and two bring HTTP back, well inside the server's 45 s offline
threshold. When the socket drops, the acks are forgotten and every runtime that was quiet
sends its HTTP heartbeat at once (Multica's waits for its next tick).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from daemon.config import Settings
from daemon.errors import RoundBoundary, RuntimeGoneError, ServerError
from daemon.local_skills.reader import LocalInventory
from daemon.protocol.client import ServerClient
from daemon.protocol.runtime_actions import PendingActions
from daemon.protocol.runtime_models import HeartbeatAck
from daemon.wakeup import Wakeup
from daemon.worker.registration import Registration, Runtime

log = logging.getLogger(__name__)

FRESH_BEATS = 2
DEFAULT_INTERVAL = 15.0
"""Heartbeat intervals an ack on the socket keeps a runtime's HTTP heartbeat away."""


class Heartbeats:
    """Keeps every registered runtime alive on the server and answers what its beats carry."""

    def __init__(
        self,
        registration: Registration,
        client: ServerClient,
        settings: Settings,
        inventory: LocalInventory | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        models: Callable[[str], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        """`inventory` reads this machine's local skills for the server (None: none);
        `models`: a runtime's model-list result, by runtime id (None: not answered)."""
        self._registration = registration
        self._client = client
        # As Multica's daemon: an interval of 0 means its default, not a beat without pause.
        self._interval = settings.heartbeat_interval or DEFAULT_INTERVAL
        self._clock = clock
        self.actions = PendingActions(client, inventory, models)
        self._acked: dict[str, float] = {}
        """When each runtime's last heartbeat on the socket was answered."""
        self._due: dict[str, Wakeup] = {}
        """Each HTTP loop's alarm: set when its runtime's heartbeat must go over HTTP now."""
        self._tg: TaskGroup | None = None
        self.http_beats = 0
        """Heartbeats sent over HTTP, the scheduled ones and those pushes asked for."""

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """One heartbeat loop per runtime, started and stopped as the runtime set changes;
        ready for acks once started."""
        scopes: dict[str, anyio.CancelScope] = {}
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                while True:
                    wanted = {r.id: r for r in self._registration.runtimes}
                    for runtime_id in [r for r in scopes if r not in wanted]:
                        scopes.pop(runtime_id).cancel()
                    for runtime_id, runtime in wanted.items():
                        if runtime_id not in scopes:
                            scopes[runtime_id] = anyio.CancelScope()
                            tg.start_soon(self._loop, runtime, scopes[runtime_id], tg)
                    await self._registration.wait_changed()
            finally:
                self._tg = None

    def over_socket(self, runtime_id: str) -> bool:
        """Whether the socket answered this runtime's heartbeat recently enough that HTTP
        stays quiet."""
        at = self._acked.get(runtime_id)
        return at is not None and self._clock() - at < FRESH_BEATS * self._interval

    def acked(self, ack: HeartbeatAck) -> None:
        """A heartbeat on the socket was answered: the runtime is alive on the server (or
        gone: registered again, as after an HTTP 404), and its pending actions start."""
        runtime, tg = self._registration.runtime(ack.runtime_id), self._tg
        if runtime is None or tg is None:
            return  # not ours (any more), or the daemon is not serving
        if ack.gone:
            # No freshness for a deleted runtime: its HTTP heartbeat must not be kept quiet.
            self._acked.pop(runtime.id, None)
            tg.start_soon(self._registration.runtime_gone, runtime.id)
            return
        self._acked[runtime.id] = self._clock()
        self.actions.handle(tg, runtime.id, runtime.backend.name, ack)

    def socket_closed(self, dropped: bool) -> None:
        """Forget the socket's acks; after a drop (not a reconnect for new runtimes, whose
        heartbeats go on the new connection at once) the runtimes it kept alive beat over
        HTTP now."""
        quiet = [r for r in self._acked if self.over_socket(r)]
        self._acked.clear()
        if dropped:
            for runtime_id in quiet:
                if (due := self._due.get(runtime_id)) is not None:
                    due.set()

    async def _loop(self, runtime: Runtime, scope: anyio.CancelScope, tg: TaskGroup) -> None:
        """Heartbeat one runtime on its own schedule; nothing else can delay it."""
        boundary = RoundBoundary(f"heartbeat {runtime.id}")
        due = self._due[runtime.id] = Wakeup()
        try:
            with scope:
                await due.wait(random.uniform(0, self._interval))
                while True:
                    with boundary:
                        if not self.over_socket(runtime.id) and not await self.beat(runtime, tg):
                            return
                    await due.wait(self._interval)
        finally:
            if self._due.get(runtime.id) is due:
                del self._due[runtime.id]

    async def beat(self, runtime: Runtime, tg: TaskGroup) -> bool:
        """One heartbeat over HTTP and the answer's pending actions (started in `tg`); False
        when the server no longer knows the runtime (its re-registration is then under way)."""
        self.http_beats += 1
        try:
            answer = await self._client.heartbeat(runtime.id)
        except RuntimeGoneError:
            # In `tg`, not the caller's scope: dropping the runtime cancels its loop's scope.
            tg.start_soon(self._registration.runtime_gone, runtime.id)
            return False
        except ServerError as exc:
            log.warning("heartbeat %s failed: %s", runtime.id, exc)
        else:
            if answer.gone:
                tg.start_soon(self._registration.runtime_gone, runtime.id)
                return False
            self.actions.handle(tg, runtime.id, runtime.backend.name, answer)
        return True
