"""One request on the health port: parse it (its head already read), route it, answer it.

The connection's deadline covers receiving the request; once its whole body is in, the port is
asked for a slot to work in (`Progress.body_in`) and the route may take longer (a repository
checkout runs git), while writing the answer gets a short deadline of its own. A body shorter
than its `Content-Length` never reaches the route: acting on part of a request is acting on a
request nobody sent.
"""

from __future__ import annotations

import io
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

from daemon.addresses import host_of_header, is_loopback

log = logging.getLogger(__name__)

JSON_CONTENT_TYPE = "application/json"
TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"
_MAX_BODY = 64 * 1024
_WRITE_WAIT = 5.0
"""Seconds the answer may take to be written once the route has it."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One HTTP answer of the health port."""

    status: int
    body: bytes
    content_type: str = JSON_CONTENT_TYPE
    headers: Sequence[tuple[str, str]] = ()


class Progress(Protocol):
    """What the transport learns of one request as it goes."""

    def body_in(self, method: str) -> bool:
        """The whole request is read: True when its route may run now (else 503)."""

    def answered(self) -> None:
        """The route is done; only the answer's writing remains."""


Route = Callable[[str, str, str, Mapping[str, str], bytes], Reply]
"""(method, path, peer address, headers, body) -> the reply; runs on a request thread."""


def local_refusal(peer: str, headers: Mapping[str, str]) -> str | None:
    """Why a request that only a local process may make is refused (None: it is local).

    On Kubernetes the port listens on every interface of the pod: only a process on the same
    host (or `kubectl exec`) may act, never another pod. A browser sends Origin on every
    cross-site POST, and a DNS-rebound page reaches 127.0.0.1 under its own host name: curl
    and Multica's CLI send neither.
    """
    if not is_loopback(peer):
        return "accepted from loopback clients only"
    if "origin" in headers:
        return "not accepted from a web page (Origin set)"
    host = headers.get("host")
    if host is not None and not is_loopback(host_of_header(host)):
        return "accepted for a loopback Host only"
    return None


def answer(sock: socket.socket, head: bytes, peer: str, route: Route, progress: Progress) -> None:
    """Read the request whose first bytes are `head` from `sock`, write the route's reply,
    telling `progress` when the request is whole and when the route is done."""
    _Handler(sock, head, peer, route, progress)


class _Replay(io.RawIOBase):
    """The bytes read ahead, then the socket: what the request handler reads from."""

    def __init__(self, head: bytes, sock: socket.socket) -> None:
        self._head = head
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    """Parses one request and writes the route's reply."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers, ~40 ms on every request.
    disable_nagle_algorithm = True

    def __init__(
        self,
        sock: socket.socket,
        head: bytes,
        peer: str,
        route: Route,
        progress: Progress,
    ) -> None:
        self._head = head
        self._peer = peer
        self._route_to = route
        self._progress = progress
        super().__init__(sock, (peer, 0), None)  # type: ignore[arg-type]

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own reader: it would keep the descriptor open
        self.rfile = io.BufferedReader(_Replay(self._head, self.request))

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def do_PUT(self) -> None:
        self._answer("PUT")

    def do_DELETE(self) -> None:
        self._answer("DELETE")

    def do_PATCH(self) -> None:
        self._answer("PATCH")

    def _answer(self, method: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            reply = Reply(400, b'{"error":"bad Content-Length"}')
        elif length > _MAX_BODY:
            reply = Reply(413, b'{"error":"request body too large"}')
        else:
            reply = self._route(method, length)
        self.request.settimeout(_WRITE_WAIT)
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(reply.body)

    def _route(self, method: str, length: int) -> Reply:
        body = self._body(length)
        if body is None:
            return Reply(400, b'{"error":"request body cut short"}')
        if not self._progress.body_in(method):
            return Reply(503, b'{"error":"the health port is busy"}')
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            return self._route_to(method, path, self._peer, headers, body)
        except Exception:
            log.exception("health port: %s %s failed", method, path)
            return Reply(500, b'{"error":"internal error"}')
        finally:
            self._progress.answered()

    def _body(self, length: int) -> bytes | None:
        """The `length` bytes of body; None when the client closes or the deadline cuts the
        connection before they are all in (a read that ends early returns what it has)."""
        if not length:
            return b""
        try:
            body = self.rfile.read(length)
        except OSError:
            return None
        return body if len(body) == length else None

    def log_message(self, format: str, *args: Any) -> None:
        # Every scrape would log a line; errors are logged by the route instead.
        pass
