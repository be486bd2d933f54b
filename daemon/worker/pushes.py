"""What the server's pushes on the control WebSocket set off, besides a claim.

`daemon:workspaces_changed` (a workspace was created, or the account joined or left one):
sync the workspaces now, so a new workspace gets its runtimes at once instead of at the
half-hourly sync. `daemon:pending_work` (`{runtime_id, kind}`, a user waits on something a
heartbeat answer carries, such as the model list): one heartbeat for that runtime now, and
its answer handled as any heartbeat's. The hint carries no work itself, so a lost or
repeated one costs nothing but the wait for the next scheduled heartbeat; as Multica's
daemon does, one runtime gets at most one such heartbeat a second and never two at once, so
a user reloading a page cannot turn the hint into a heartbeat flood.
`daemon:runtime_profiles_changed` (`{workspace_id}`), and every time the control channel
opens (for every workspace): read the workspace's custom runtime profiles and register again
if they differ from those registered; one read per workspace at a time, a notice arriving
meanwhile read once more after it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
from anyio.abc import TaskGroup

from daemon.errors import RoundBoundary
from daemon.task.background import Background
from daemon.worker.heartbeats import Heartbeats
from daemon.worker.registration import Registration

log = logging.getLogger(__name__)

MIN_INTERVAL = 1.0
"""Seconds between two pushed heartbeats of one runtime (Multica's floor)."""
BEAT_WITHIN = 15.0
"""A pushed heartbeat gives up after this long: the scheduled one still comes."""
FORGET_AFTER = 600.0
"""A runtime's last pushed heartbeat is forgotten after this long, keeping the table small."""


class Pushes(Background):
    """Acts on the server's workspace, pending-work and profile pushes; `run` holds their
    tasks."""

    def __init__(
        self,
        registration: Registration,
        heartbeats: Heartbeats,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._registration = registration
        self._heartbeats = heartbeats
        self._clock = clock
        self._last: dict[str, float] = {}
        self._inflight: set[str] = set()
        self._refreshing: set[str] = set()
        self._refresh_again: set[str] = set()
        self.beats = 0
        """Heartbeats sent for pending-work pushes (tests and `status` read it)."""

    @property
    def in_flight(self) -> frozenset[str]:
        """The runtimes whose pushed heartbeat has not been answered yet."""
        return frozenset(self._inflight)

    def workspaces_changed(self) -> None:
        """A workspace came or went for this account: sync them now."""
        self._registration.request_sync()

    def runtime_profiles_changed(self, workspace_id: str) -> None:
        """A profile of the workspace changed: read them now (again after a read under way)."""
        if self._tg is None:
            return
        if workspace_id in self._refreshing:
            self._refresh_again.add(workspace_id)
            return
        self._refreshing.add(workspace_id)
        self._tg.start_soon(self._refresh, workspace_id)

    def reconnected(self) -> None:
        """The control channel opened: profile notices may have been missed, read them all."""
        for workspace in self._registration.workspaces:
            self.runtime_profiles_changed(workspace["id"])

    async def _refresh(self, workspace_id: str) -> None:
        try:
            while True:
                self._refresh_again.discard(workspace_id)
                with RoundBoundary(f"profiles of {workspace_id}"):
                    await self._registration.refresh_profiles(workspace_id)
                if workspace_id not in self._refresh_again:
                    return
        finally:
            self._refreshing.discard(workspace_id)

    def pending_work(self, runtime_id: str, kind: str) -> None:
        """Something waits for `runtime_id`'s next heartbeat: send it now, within the limit."""
        runtime = self._registration.runtime(runtime_id)
        if runtime is None or self._tg is None:
            return  # another daemon's runtime, or one just dropped
        now = self._clock()
        self._last = {r: at for r, at in self._last.items() if now - at < FORGET_AFTER}
        if runtime_id in self._inflight or now - self._last.get(runtime_id, -MIN_INTERVAL) < (
            MIN_INTERVAL
        ):
            log.debug("pending work for %s (%s): heartbeat throttled", runtime_id, kind)
            return
        self._inflight.add(runtime_id)
        self._last[runtime_id] = now
        self.beats += 1
        log.debug("pending work for %s (%s): heartbeat now", runtime_id, kind)
        self._tg.start_soon(self._beat, runtime_id, self._tg)

    async def _beat(self, runtime_id: str, tg: TaskGroup) -> None:
        try:
            runtime = self._registration.runtime(runtime_id)
            if runtime is not None:
                with anyio.move_on_after(BEAT_WITHIN):
                    await self._heartbeats.beat(runtime, tg)
        finally:
            self._inflight.discard(runtime_id)
