"""Multica's control WebSocket, client side: the server's news, the runtimes' heartbeats and,
once the server says `rpc-v1`, requests (claims) with their answers.

`GET /api/daemon/ws?runtime_ids=<sorted, comma-separated>` with the HTTP requests' headers.
The daemon sends, while a connection is open, `{"type": "daemon:heartbeat", "payload":
{"runtime_id", "supports_batch_import": true}}` for each runtime at once and then every
heartbeat interval, and the requests of control_rpc.py. It acts on these frames and ignores
any other:

- `{"type": "daemon:task_available", "payload": {"runtime_id", "task_id"}}` wakes the claim loop;
- `{"type": "daemon:workspaces_changed"}`: the account's workspaces changed (`Pushes` syncs);
- `{"type": "daemon:pending_work", "payload": {"runtime_id", "kind"}}`: a heartbeat answer holds
  work a user waits on (`Pushes` sends that runtime's heartbeat now);
- `{"type": "daemon:heartbeat_ack", "payload": {"runtime_id", "status", "runtime_gone",
  "server_capabilities", "pending_*"...}}`: a heartbeat answered, as the HTTP answer would be
  (`Heartbeats` acts on it; `rpc-v1` among the capabilities lets requests go on this
  connection);
- `{"type": "daemon:rpc_response", "payload": {"request_id", "status", "body", "error"}}`: the
  answer to a request (control_rpc.py).

The channel never holds the daemon back: a server without the route (404, a refused upgrade)
or a dropped connection leaves the HTTP heartbeats and claims to do the same work (an ack
under two heartbeat intervals old is what keeps a runtime's HTTP heartbeat away).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import quote

import anyio
from pydantic import ValidationError
from pydantic_core import to_json
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from daemon.errors import RoundBoundary
from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.protocol import jsonin
from daemon.protocol.answers import ANSWER_LIMIT
from daemon.protocol.control_rpc import RPC_RESPONSE, RPC_V1, ControlCalls, RpcAnswer
from daemon.protocol.runtime_models import HeartbeatAck
from daemon.wakeup import Wakeup

log = logging.getLogger(__name__)

PATH = "/api/daemon/ws"
TASK_AVAILABLE = "daemon:task_available"
WORKSPACES_CHANGED = "daemon:workspaces_changed"
PENDING_WORK = "daemon:pending_work"
HEARTBEAT = "daemon:heartbeat"
HEARTBEAT_ACK = "daemon:heartbeat_ack"
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
FRAME_LIMIT = ANSWER_LIMIT + 64 * 1024
"""Bytes of one frame read: a claim's answer as large as one over HTTP may be (up to 32 tasks
with their instructions, context and skills), in its envelope. Multica's daemon reads up to
64 MiB; its old 64 KiB left a claim the server had made unread, so the task never started."""
_KNOWN = {
    f"daemon:{kind}"
    for kind in ("task_available", "workspaces_changed", "pending_work", "heartbeat_ack")
} | {RPC_RESPONSE}


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


class SocketBeats(Protocol):
    """What hears of the heartbeats answered on the socket, and of the socket closing."""

    def acked(self, ack: HeartbeatAck) -> None:
        """A heartbeat sent on the socket was answered."""

    def socket_closed(self, dropped: bool) -> None:
        """The connection closed: `dropped` when it was lost, not reopened for new runtimes."""


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
        self._metrics = metrics
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
                self._handle(frame, ws)
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

    def _handle(self, frame: str | bytes, ws: ClientConnection) -> None:
        try:
            message = jsonin.loads(frame, limit=FRAME_LIMIT, what="a control frame")
        except ValueError as exc:
            self._count("unknown", "malformed")
            log.debug("control channel: frame dropped: %s", exc)
            return
        if not isinstance(message, dict):
            self._count("unknown", "malformed")
            return
        kind = message.get("type")
        payload = message.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        self._count(kind if isinstance(kind, str) and kind in _KNOWN else "other", "read")
        if kind == HEARTBEAT_ACK:
            self._ack(payload, ws)
        elif kind == RPC_RESPONSE:
            self._answer(payload)
        elif kind == TASK_AVAILABLE:
            log.debug("control channel: task %s available", short_id(str(payload.get("task_id"))))
            self._wakeup.set()
        elif kind == WORKSPACES_CHANGED and self._pushes is not None:
            self._pushes.workspaces_changed()
        elif kind == PENDING_WORK and self._pushes is not None:
            # As Multica's daemon: a payload of the wrong shape, or without a runtime, is dropped.
            runtime_id, work = payload.get("runtime_id"), payload.get("kind", "")
            if isinstance(runtime_id, str) and runtime_id and isinstance(work, str):
                self._pushes.pending_work(runtime_id, work)

    def _ack(self, payload: dict[str, object], ws: ClientConnection) -> None:
        try:
            ack = HeartbeatAck.model_validate(payload)
        except ValidationError:
            self._count(HEARTBEAT_ACK, "malformed")
            log.debug("control channel: a heartbeat ack that does not parse, dropped")
            return
        if not ack.runtime_id:
            return
        if RPC_V1 in ack.server_capabilities and not ack.gone:
            self.calls.server_said_rpc_v1(ws)
        if self._beats is not None:
            self._beats.acked(ack)

    def _answer(self, payload: dict[str, object]) -> None:
        request_id, status = payload.get("request_id"), payload.get("status")
        error = payload.get("error") or ""
        if not isinstance(request_id, str) or type(status) is not int or not isinstance(error, str):
            # Left unanswered, the request ends unconfirmed: the safe reading of a broken answer.
            self._count(RPC_RESPONSE, "malformed")
            log.debug("control channel: an rpc answer that does not parse, dropped")
            return
        self.calls.deliver(request_id, RpcAnswer(status, payload.get("body"), error))

    def _count(self, kind: str, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.control_frames.labels(kind.removeprefix("daemon:"), outcome).inc()

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
