"""Multica's control WebSocket, client side: one connection for the current runtimes,
reopened with backoff, on which the server's news comes (control_frames.py), the runtimes'
heartbeats go and, once the server says `rpc-v1`, requests (claims) with their answers
(control_rpc.py).

`GET /api/daemon/ws?runtime_ids=<sorted, comma-separated>` with the HTTP requests' headers.
While a connection is open the daemon sends `{"type": "daemon:heartbeat", "payload":
{"runtime_id", "supports_batch_import": true}}` for each runtime at once and then every
heartbeat interval, as Multica's daemon does.

The channel never holds the daemon back: a server without the route (404, a refused upgrade)
or a dropped connection leaves the HTTP heartbeats and claims to do the same work (an ack
under two heartbeat intervals old is what keeps a runtime's HTTP heartbeat away).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

import anyio
from pydantic_core import to_json
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from daemon.errors import RoundBoundary
from daemon.ops.metrics import Metrics
from daemon.protocol.control_frames import FRAME_LIMIT, ControlFrames, PushHandler, SocketBeats
from daemon.protocol.control_rpc import ControlCalls
from daemon.wakeup import Wakeup

log = logging.getLogger(__name__)

PATH = "/api/daemon/ws"
HEARTBEAT = "daemon:heartbeat"
HEARTBEAT_INTERVAL = 15.0
BACKOFF_FIRST = 1.0
BACKOFF_CAP = 30.0
RESET_AFTER = 10.0
"""A connection that lasted this long was healthy: the next reconnect starts at BACKOFF_FIRST."""
PING_INTERVAL = 20.0
PONG_TIMEOUT = 60.0
NO_RUNTIMES_WAIT = 1.0
"""How often to look again while the daemon has no runtimes yet."""
OPEN_TIMEOUT = 10.0


class _NoRedirects(connect):
    """`connect` that follows no redirect: a 3xx on the upgrade is a failed attempt like any
    other status, so the daemon's token never goes to an address the server names."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


@dataclass(frozen=True, slots=True)
class ChannelTiming:
    """The channel's intervals: pings, how long a pong may take, heartbeats, reconnect jitter."""

    ping_interval: float = PING_INTERVAL
    pong_timeout: float = PONG_TIMEOUT
    """Seconds without a pong after which the connection counts as dead (and is reopened)."""
    heartbeat_interval: float = HEARTBEAT_INTERVAL
    """Seconds between a runtime's heartbeats on the socket (0: Multica's 15 s)."""
    jitter: Callable[[float, float], float] = random.uniform
    """Spreads the reconnect backoff (so daemons do not reconnect in step)."""

    def runtime_profiles_changed(self, workspace_id: str) -> None:
        """A custom runtime profile of the workspace changed."""

    def reconnected(self) -> None:
        """The channel (re)opened: what was announced while it was closed is lost."""


class ControlChannel:
    """Keeps the control WebSocket open for the current runtimes, sets `wakeup` on news, sends
    the runtimes' heartbeats and carries requests (`calls`)."""

    def __init__(
        self,
        server_url: str,
        headers: Mapping[str, str],
        runtime_ids: Callable[[], Sequence[str]],
        wakeup: Wakeup,
        *,
        timing: ChannelTiming = ChannelTiming(),
        pushes: PushHandler | None = None,
        beats: SocketBeats | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """`beats`: heartbeats are sent on the socket and their acks go there (None: none are
        sent)."""
        self._base = ws_url(server_url)
        self._headers = dict(headers)
        self._user_agent = self._headers.pop("User-Agent", None)
        self._runtime_ids = runtime_ids
        self._wakeup = wakeup
        self._pushes = pushes
        self._beats = beats
        self._timing = timing
        self.calls = ControlCalls()
        """The requests this channel carries."""
        self._frames = ControlFrames(wakeup, self.calls, pushes, beats, metrics)
        self._session_scope = anyio.CancelScope()
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
            ids = sorted(set(self._runtime_ids()))
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
            await anyio.sleep(delay * self._timing.jitter(0.8, 1.2))
            delay = min(delay * 2, BACKOFF_CAP)

    async def _session(self, ids: list[str]) -> bool:
        """One connection until it drops (False) or the runtime set changes (True)."""
        url = f"{self._base}?runtime_ids={quote(','.join(ids), safe=',')}"
        async with _NoRedirects(
            url,
            additional_headers=self._headers,
            user_agent_header=self._user_agent,
            open_timeout=OPEN_TIMEOUT,
            ping_interval=self._timing.ping_interval,
            ping_timeout=self._timing.pong_timeout,
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
            if sorted(set(self._runtime_ids())) != ids:  # re-registered while we connected
                self._session_scope.cancel()
            self.calls.attach(ws)
            try:
                with self._session_scope:
                    async with anyio.create_task_group() as tg:
                        if self._beats is not None:
                            tg.start_soon(self._send_beats, ws, ids)
                        await self._read(ws)
                        tg.cancel_scope.cancel()
            finally:
                # Requests still waiting end unconfirmed; the HTTP heartbeats take over.
                self.calls.attach(None)
                self.connected = anyio.Event()
                changed = self._session_scope.cancel_called
                if self._beats is not None:
                    self._beats.socket_closed(dropped=not changed)
            if not changed:
                log.info("control channel closed; heartbeats and claims over HTTP until it reopens")
            return changed

    async def _read(self, ws: ClientConnection) -> None:
        """Act on each frame until the connection closes (cleanly or not)."""
        try:
            async for frame in ws:
                self._frames.handle(frame, ws)
        except ConnectionClosed as exc:
            log.debug("control channel lost: %s", exc)

    async def _send_beats(self, ws: ClientConnection, ids: list[str]) -> None:
        """Each runtime's heartbeat at once, then every heartbeat interval, as Multica's
        daemon sends them on its socket."""
        frames = [
            to_json(
                {"type": HEARTBEAT, "payload": {"runtime_id": i, "supports_batch_import": True}}
            ).decode()
            for i in ids
        ]
        try:
            while True:
                for frame in frames:
                    await ws.send(frame)
                await anyio.sleep(self._timing.heartbeat_interval or HEARTBEAT_INTERVAL)
        except ConnectionClosed:
            return  # the reader sees the close too and ends the session

    def _failed(self, exc: Exception) -> None:
        # One line per outage, not one per retry: a server without the route would otherwise
        # log every 30 s for the daemon's whole life.
        if isinstance(exc, InvalidStatus):
            reason = f"HTTP {exc.response.status_code}"
        else:
            reason = f"{type(exc).__name__}: {exc}"
        level = logging.DEBUG if self._quiet else logging.INFO
        log.log(level, "control channel unavailable (%s); heartbeats and claims over HTTP", reason)
        self._quiet = True


def ws_url(server_url: str) -> str:
    """The control route's ws:// or wss:// address for an http:// or https:// server URL."""
    base = server_url.rstrip("/")
    if base.startswith("https://"):
        return "wss://" + base[len("https://") :] + PATH
    if base.startswith("http://"):
        return "ws://" + base[len("http://") :] + PATH
    return base + PATH
