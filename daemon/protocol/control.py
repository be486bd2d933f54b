"""Multica's control WebSocket, client side: the server says a task waits, the daemon claims.

`GET /api/daemon/ws?runtime_ids=<sorted, comma-separated>` with the HTTP requests' headers.
Three frames are acted on, anything else is ignored:

- `{"type": "daemon:task_available", "payload": {"runtime_id", "task_id"}}` wakes the claim loop;
- `{"type": "daemon:workspaces_changed"}`: the account's workspaces changed (`Pushes` syncs);
- `{"type": "daemon:pending_work", "payload": {"runtime_id", "kind"}}`: a heartbeat answer holds
  work a user waits on (`Pushes` sends that runtime's heartbeat now);
- `{"type": "daemon:runtime_profiles_changed", "payload": {"workspace_id", ...}}`: a custom
  runtime profile of that workspace was created, edited, disabled or deleted (`Pushes` reads
  them again). Each time the channel opens, the profiles of every workspace are read again
  too: a change made while it was closed was announced to nobody.

The channel only brings things forward: claims and heartbeats stay HTTP, and their intervals
stay the fallback, so a server without the route (404, a refused upgrade) or a dropped
connection leaves the daemon working exactly as it would without the channel.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol
from urllib.parse import quote

import anyio
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus, WebSocketException

from daemon.errors import RoundBoundary
from daemon.logs import short_id
from daemon.protocol import jsonin
from daemon.wakeup import Wakeup

log = logging.getLogger(__name__)

PATH = "/api/daemon/ws"
TASK_AVAILABLE = "daemon:task_available"
WORKSPACES_CHANGED = "daemon:workspaces_changed"
PENDING_WORK = "daemon:pending_work"
PROFILES_CHANGED = "daemon:runtime_profiles_changed"
BACKOFF_FIRST = 1.0
BACKOFF_CAP = 30.0
RESET_AFTER = 10.0
"""A connection that lasted this long was healthy: the next reconnect starts at BACKOFF_FIRST."""
PING_INTERVAL = 20.0
PONG_TIMEOUT = 60.0
"""Seconds without a pong after which the connection counts as dead (and is reopened)."""
NO_RUNTIMES_WAIT = 1.0
"""How often to look again while the daemon has no runtimes yet."""
OPEN_TIMEOUT = 10.0
FRAME_LIMIT = 64 * 1024
"""Bytes of one frame read: the one frame acted on is a few hundred bytes."""


class _NoRedirects(connect):
    """`connect` that follows no redirect: a 3xx on the upgrade is a failed attempt like any
    other status, so the daemon's token never goes to an address the server names."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


class PushHandler(Protocol):
    """What the daemon does with the pushes that are not a task's wake-up."""

    def workspaces_changed(self) -> None:
        """The account's workspaces changed."""

    def pending_work(self, runtime_id: str, kind: str) -> None:
        """A heartbeat answer for `runtime_id` holds work of this kind."""

    def runtime_profiles_changed(self, workspace_id: str) -> None:
        """A custom runtime profile of the workspace changed."""

    def reconnected(self) -> None:
        """The channel (re)opened: what was announced while it was closed is lost."""


class ControlChannel:
    """Keeps the control WebSocket open for the current runtimes and sets `wakeup` on news."""

    def __init__(
        self,
        server_url: str,
        headers: Mapping[str, str],
        runtime_ids: Callable[[], Sequence[str]],
        wakeup: Wakeup,
        *,
        ping_interval: float = PING_INTERVAL,
        pong_timeout: float = PONG_TIMEOUT,
        jitter: Callable[[float, float], float] = random.uniform,
        pushes: PushHandler | None = None,
    ) -> None:
        self._base = ws_url(server_url)
        self._headers = dict(headers)
        self._user_agent = self._headers.pop("User-Agent", None)
        self._runtime_ids = runtime_ids
        self._wakeup = wakeup
        self._pushes = pushes
        self._ping_interval = ping_interval
        self._pong_timeout = pong_timeout
        self._session_scope = anyio.CancelScope()
        self._jitter = jitter
        self._quiet = False
        self._boundary = RoundBoundary("control channel")
        self.connected = anyio.Event()
        """Set while a connection is open (tests wait on it); replaced when it closes."""

    def runtimes_changed(self) -> None:
        """The daemon registered again: reopen the connection for the new runtime set."""
        self._session_scope.cancel()

    async def run(self) -> None:
        """Connect, listen, reconnect with jittered backoff; until cancelled."""
        delay = BACKOFF_FIRST
        while True:
            ids = sorted(self._runtime_ids())
            if not ids:
                await anyio.sleep(NO_RUNTIMES_WAIT)
                continue
            began = anyio.current_time()
            with self._boundary:
                try:
                    if await self._session(ids):
                        delay = BACKOFF_FIRST
                        continue  # the runtime set changed: reconnect for the new one at once
                except (OSError, TimeoutError, EOFError, WebSocketException) as exc:
                    # EOFError: the server closed the socket mid-handshake (older websockets
                    # let it through unwrapped).
                    self._failed(exc)
            if anyio.current_time() - began >= RESET_AFTER:
                delay = BACKOFF_FIRST
            await anyio.sleep(delay * self._jitter(0.8, 1.2))
            delay = min(delay * 2, BACKOFF_CAP)

    async def _session(self, ids: list[str]) -> bool:
        """One connection until it drops (False) or the runtime set changes (True)."""
        url = f"{self._base}?runtime_ids={quote(','.join(ids), safe=',')}"
        async with _NoRedirects(
            url,
            additional_headers=self._headers,
            user_agent_header=self._user_agent,
            open_timeout=OPEN_TIMEOUT,
            ping_interval=self._ping_interval,
            ping_timeout=self._pong_timeout,
            compression=None,
            max_size=FRAME_LIMIT,
        ) as ws:
            log.info("control channel open for %d runtimes", len(ids))
            self._quiet = False
            self.connected.set()
            # Tasks queued while we were not listening were announced to nobody: claim once.
            self._wakeup.set()
            if self._pushes is not None:
                self._pushes.reconnected()
            self._session_scope = anyio.CancelScope()
            if sorted(self._runtime_ids()) != ids:  # re-registered while we connected
                self._session_scope.cancel()
            try:
                with self._session_scope:
                    async for frame in ws:
                        self._handle(frame)
            finally:
                self.connected = anyio.Event()
            changed = self._session_scope.cancel_called
            if not changed:
                log.info("control channel closed; polling until it reopens")
            return changed

    def _handle(self, frame: str | bytes) -> None:
        try:
            message = jsonin.loads(frame, limit=FRAME_LIMIT, what="a control frame")
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")
        payload = message.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        if kind == TASK_AVAILABLE:
            log.debug("control channel: task %s available", short_id(str(payload.get("task_id"))))
            self._wakeup.set()
        elif kind == WORKSPACES_CHANGED and self._pushes is not None:
            self._pushes.workspaces_changed()
        elif kind == PENDING_WORK and self._pushes is not None:
            # As Multica's daemon: a payload of the wrong shape, or without a runtime, is dropped.
            runtime_id, work = payload.get("runtime_id"), payload.get("kind", "")
            if isinstance(runtime_id, str) and runtime_id and isinstance(work, str):
                self._pushes.pending_work(runtime_id, work)
        elif kind == PROFILES_CHANGED and self._pushes is not None:
            workspace_id = payload.get("workspace_id")
            if isinstance(workspace_id, str) and workspace_id:
                self._pushes.runtime_profiles_changed(workspace_id)

    def _failed(self, exc: Exception) -> None:
        # One line per outage, not one per retry: a server without the route would otherwise
        # log every 30 s for the daemon's whole life.
        if isinstance(exc, InvalidStatus):
            reason = f"HTTP {exc.response.status_code}"
        else:
            reason = f"{type(exc).__name__}: {exc}"
        level = logging.DEBUG if self._quiet else logging.INFO
        log.log(level, "control channel unavailable (%s); claiming by polling", reason)
        self._quiet = True


def ws_url(server_url: str) -> str:
    """The control route's ws:// or wss:// address for an http:// or https:// server URL."""
    base = server_url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://") :] + PATH
    if base.startswith("http://"):
        return "ws://" + base[len("http://") :] + PATH
    return base + PATH
