"""The runtimes' heartbeats: one loop per runtime, each on its own schedule, and the one beat
they share with a heartbeat the server asks for (`pushes.py`); each answer's pending actions
are started as they come."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from daemon.config import Settings
from daemon.errors import RoundBoundary, RuntimeGoneError, ServerError
from daemon.protocol.client import ServerClient
from daemon.protocol.runtime_actions import PendingActions
from daemon.worker.registration import Registration, Runtime

log = logging.getLogger(__name__)


class Heartbeats:
    """Keeps every registered runtime alive on the server and answers what its beats carry."""

    def __init__(
        self,
        registration: Registration,
        client: ServerClient,
        settings: Settings,
        *,
        models: Callable[[str], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        """`models`: a runtime's model-list result, by runtime id (None: not answered)."""
        self._registration = registration
        self._client = client
        self._interval = settings.heartbeat_interval
        self.actions = PendingActions(client, models)

    async def run(self) -> None:
        """One heartbeat loop per runtime, started and stopped as the runtime set changes."""
        scopes: dict[str, anyio.CancelScope] = {}
        async with anyio.create_task_group() as tg:
            while True:
                wanted = {r.id: r for r in self._registration.runtimes}
                for runtime_id in [r for r in scopes if r not in wanted]:
                    scopes.pop(runtime_id).cancel()
                for runtime_id, runtime in wanted.items():
                    if runtime_id not in scopes:
                        scopes[runtime_id] = anyio.CancelScope()
                        tg.start_soon(self._loop, runtime, scopes[runtime_id], tg)
                await self._registration.wait_changed()

    async def _loop(self, runtime: Runtime, scope: anyio.CancelScope, tg: TaskGroup) -> None:
        """Heartbeat one runtime on its own schedule; nothing else can delay it."""
        boundary = RoundBoundary(f"heartbeat {runtime.id}")
        with scope:
            await anyio.sleep(random.uniform(0, self._interval))
            while True:
                with boundary:
                    if not await self.beat(runtime, tg):
                        return
                await anyio.sleep(self._interval)

    async def beat(self, runtime: Runtime, tg: TaskGroup) -> bool:
        """One heartbeat and the answer's pending actions (started in `tg`); False when the
        server no longer knows the runtime (its re-registration is then under way)."""
        try:
            answer = await self._client.heartbeat(runtime.id)
        except RuntimeGoneError:
            # In `tg`, not the caller's scope: dropping the runtime cancels its loop's scope.
            tg.start_soon(self._registration.runtime_gone, runtime.id)
            return False
        except ServerError as exc:
            log.warning("heartbeat %s failed: %s", runtime.id, exc)
        else:
            self.actions.handle(tg, runtime.id, runtime.backend.name, answer)
        return True
