"""An HTTP proxy on loopback that makes a real server misbehave on command, for chaos tests.

    async with chaos_proxy(server_url) as proxy:
        daemon talks to proxy.url
        await proxy.set_mode("500")      # every request answered 500 by the proxy
        await proxy.set_mode("429")      # 429 with `Retry-After: 1`
        await proxy.set_mode("reset")    # the connection is reset mid-request
        await proxy.set_mode("cut")      # forwarded to the server, then reset: answer lost
        await proxy.set_mode("down")     # nothing listens: connects are refused
        await proxy.set_mode("pass")     # listening again on the same port, passing through
        await proxy.set_mode("500", only={"complete"})   # fail only these endpoints

Only `pass` and `cut` forward anything to the server: a failure the proxy makes up never
reaches it, so the server's own counters (e.g. terminal reports per task) show exactly what the
daemon delivered. Going `down` lets requests already being forwarded finish, then closes every other
connection; requests are recorded per endpoint and mode in `seen` (a refused connect cannot be).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import anyio
import httpx
from anyio.abc import SocketAttribute, SocketStream, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from daemon.server.serve import KEEP_ALIVE
from tests.fakes.tcp_listener import listening_socket, reserved_port, serve

Mode = Literal["pass", "500", "429", "reset", "down", "cut"]
MODES: tuple[Mode, ...] = ("pass", "500", "429", "reset", "down", "cut")
_MAX_HEAD = 64 * 1024
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
)
_CANNED: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "500": ("500 Internal Server Error", []),
    "429": ("429 Too Many Requests", [("Retry-After", "1")]),
}


@dataclass(frozen=True, slots=True)
class Seen:
    """One request the proxy read: when, in which mode, and what."""

    at: float
    mode: Mode
    method: str
    path: str
    body: bytes

    @property
    def endpoint(self) -> str:
        """The protocol endpoint: `claim`, `heartbeat`, or a task action such as `complete`."""
        return endpoint_of(self.path)


def endpoint_of(path: str) -> str:
    """`/api/daemon/tasks/<id>/complete` → `complete`; otherwise the path's last segment."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) == 5 and parts[:3] == ["api", "daemon", "tasks"]:
        return parts[4]
    return parts[-1] if parts else ""


class _Connection:
    """One client connection: its stream and whether it is between requests."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.idle = True
        self.scope = anyio.CancelScope()


class ChaosProxy:
    """Forwards HTTP/1.1 requests to `upstream`, or fails them the way `mode` says."""

    def __init__(self, upstream: str, tg: TaskGroup) -> None:
        self.mode: Mode = "down"
        self.only: frozenset[str] | None = None
        # Held for the proxy's life: while it is `down` the port refuses connections, and a
        # neighbour's server cannot bind it and answer the daemon in its place.
        self._reserved = reserved_port()
        self.port: int = self._reserved.getsockname()[1]
        self.seen: list[Seen] = []
        self._tg = tg
        # The server closes an idle keep-alive connection after KEEP_ALIVE seconds; a request
        # sent on it at that moment is lost (ReadError). On a loaded machine the gaps between a
        # test's requests reach that: idle connections are dropped a second before the server's.
        keep = httpx.Limits(keepalive_expiry=KEEP_ALIVE - 1)
        self._upstream = httpx.AsyncClient(base_url=upstream, timeout=60.0, limits=keep)
        self._connections: set[_Connection] = set()
        self._listening: anyio.CancelScope | None = None
        self._closed = anyio.Event()

    @property
    def url(self) -> str:
        """The proxy's base URL (the port stays the same across `down` and back)."""
        return f"http://127.0.0.1:{self.port}"

    def count(self, endpoint: str | None = None, mode: Mode | None = None) -> int:
        """Requests read so far, optionally only for one endpoint and/or mode."""
        return sum(
            1
            for s in self.seen
            if (endpoint is None or s.endpoint == endpoint) and (mode is None or s.mode == mode)
        )

    def times(self, endpoint: str) -> list[float]:
        """Monotonic arrival times of every request to `endpoint`."""
        return [s.at for s in self.seen if s.endpoint == endpoint]

    def requests(self, where: Callable[[Seen], bool]) -> list[Seen]:
        """The requests read so far that match `where`."""
        return [s for s in self.seen if where(s)]

    async def set_mode(self, mode: Mode, only: set[str] | None = None) -> None:
        """Switch behaviour now; `down` and back rebinds the listener on the same port.

        With `only`, the mode applies to those endpoints (see `endpoint_of`) and every other
        request passes through; `down` always applies to everything.
        """
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        self.only = None if only is None else frozenset(only)
        previous, self.mode = self.mode, mode
        if mode == "down" and previous != "down":
            self._stop_listening()
            with anyio.fail_after(10):
                await self._closed.wait()
        elif previous == "down" and mode != "down":
            await self._listen()

    async def _listen(self) -> None:
        # Beside the reserved socket; an old listener's connections in TIME_WAIT are ignored
        # (SO_REUSEADDR).
        sock = listening_socket(self.port, shared=True)
        scope = anyio.CancelScope()
        self._listening = scope
        closed = self._closed = anyio.Event()

        async def accept() -> None:
            try:
                with scope:
                    await serve(sock, self._handle, self._tg)
            finally:
                sock.close()
                closed.set()

        self._tg.start_soon(accept)

    def _stop_listening(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            self._listening = None
        for conn in list(self._connections):
            if conn.idle:
                conn.scope.cancel()

    async def _handle(self, stream: SocketStream) -> None:
        conn = _Connection(stream)
        self._connections.add(conn)
        try:
            with conn.scope:
                await self._exchange_all(conn)
        finally:
            self._connections.discard(conn)
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    async def _exchange_all(self, conn: _Connection) -> None:
        reader = BufferedByteReceiveStream(conn.stream)
        while self.mode != "down":
            conn.idle = True
            try:
                head = await reader.receive_until(b"\r\n\r\n", _MAX_HEAD)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                return
            conn.idle = False
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = [tuple(h.split(":", 1)) for h in lines[1:] if ":" in h]
            mode = self.mode
            if mode != "down" and self.only is not None and endpoint_of(target) not in self.only:
                mode = "pass"
            if mode in ("reset", "down"):
                # Mid-request: the head is read, the body is not; nothing reaches the server.
                self.seen.append(Seen(time.monotonic(), mode, method, target, b""))
                _reset(conn.stream)
                return
            length = next((int(v) for k, v in headers if k.strip().lower() == "content-length"), 0)
            try:
                body = await reader.receive_exactly(length) if length else b""
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                return
            self.seen.append(Seen(time.monotonic(), mode, method, target, body))
            if mode == "cut":
                # The server acts on the request; its answer is lost with the connection.
                await self._forward(method, target, headers, body)
                _reset(conn.stream)
                return
            if mode == "pass":
                reply = await self._forward(method, target, headers, body)
            else:
                status, extra = _CANNED[mode]
                reply = _response(
                    status, extra, b'{"error": "chaos proxy: ' + mode.encode() + b'"}'
                )
            with anyio.CancelScope(shield=True):
                await conn.stream.send(reply)

    async def _forward(
        self, method: str, target: str, headers: list[tuple[str, ...]], body: bytes
    ) -> bytes:
        send = {k.strip(): v.strip() for k, v in headers if k.strip().lower() not in _HOP_BY_HOP}
        send.pop("Host", None)
        send.pop("host", None)
        # Shielded: once a request is on its way to the server its answer must come back to
        # the client, or the server would have done something the client never learns about.
        with anyio.CancelScope(shield=True):
            answer = await self._upstream.request(method, target, headers=send, content=body)
        extra = [(k, v) for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP]
        status = f"{answer.status_code} {answer.reason_phrase}"
        return _response(status, extra, answer.content)

    async def aclose(self) -> None:
        self._stop_listening()
        for conn in list(self._connections):
            conn.scope.cancel()
        await self._upstream.aclose()
        self._reserved.close()


def _response(status: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers)]
    lines += (
        ["Content-Type: application/json"]
        if not any(k.lower() == "content-type" for k, _ in headers)
        else []
    )
    lines += [f"Content-Length: {len(body)}", "Connection: keep-alive", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def _reset(stream: SocketStream) -> None:
    """Make the coming close send RST instead of FIN (SO_LINGER with a zero timeout)."""
    sock: socket.socket = stream.extra(SocketAttribute.raw_socket)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@asynccontextmanager
async def chaos_proxy(upstream: str) -> AsyncIterator[ChaosProxy]:
    """A `ChaosProxy` in front of `upstream` on a free loopback port, passing through."""
    async with anyio.create_task_group() as tg:
        proxy = ChaosProxy(upstream, tg)
        await proxy.set_mode("pass")
        try:
            yield proxy
        finally:
            with anyio.CancelScope(shield=True):
                await proxy.aclose()
            tg.cancel_scope.cancel()
