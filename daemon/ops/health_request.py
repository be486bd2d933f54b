"""One request on the health port: parse it (its head already read), route it, answer it."""

from __future__ import annotations

import io
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

log = logging.getLogger(__name__)

JSON_CONTENT_TYPE = "application/json"
_MAX_BODY = 64 * 1024


@dataclass(frozen=True, slots=True)
class Reply:
    """One HTTP answer of the health port."""

    status: int
    body: bytes
    content_type: str = JSON_CONTENT_TYPE


Route = Callable[[str, str, str, Mapping[str, str]], Reply]
"""(method, path, peer address, headers) -> the reply; runs on a request thread."""


def answer(sock: socket.socket, head: bytes, peer: str, route: Route) -> None:
    """Read the request whose first bytes are `head` from `sock`, write the route's reply."""
    _Handler(sock, head, peer, route)


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

    def __init__(self, sock: socket.socket, head: bytes, peer: str, route: Route) -> None:
        self._head = head
        self._peer = peer
        self._route_to = route
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
            if length:
                self.rfile.read(length)
            path = self.path.split("?", 1)[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                reply = self._route_to(method, path, self._peer, headers)
            except Exception:
                log.exception("health port: %s %s failed", method, path)
                reply = Reply(500, b'{"error":"internal error"}')
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:
        # Every scrape would log a line; errors are logged by the route instead.
        pass
