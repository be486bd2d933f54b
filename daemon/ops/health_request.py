"""One request on the health port: parse it (its head already read), route it, answer it.

The connection's deadline covers receiving the request; once its body is in, `working` is
called and the route may take longer (a repository checkout runs git), while writing the answer
gets a short deadline of its own.
"""

from __future__ import annotations

import io
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

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


def answer(
    sock: socket.socket, head: bytes, peer: str, route: Route, working: Callable[[], None]
) -> None:
    """Read the request whose first bytes are `head` from `sock`, write the route's reply;
    `working` is called once the request is read, before the route runs."""
    _Handler(sock, head, peer, route, working)


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
        working: Callable[[], None],
    ) -> None:
        self._head = head
        self._peer = peer
        self._route_to = route
        self._working = working
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
            body = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            self._working()
            try:
                reply = self._route_to(method, path, self._peer, headers, body)
            except Exception:
                log.exception("health port: %s %s failed", method, path)
                reply = Reply(500, b'{"error":"internal error"}')
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

    def log_message(self, format: str, *args: Any) -> None:
        # Every scrape would log a line; errors are logged by the route instead.
        pass
