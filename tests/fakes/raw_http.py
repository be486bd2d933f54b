"""A TCP server on loopback that answers HTTP requests with whatever bytes a test writes: for
answers no web framework sends (chunked with trailers, interim answers, malformed heads,
silence, a hang-up after the request)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import httpx
from anyio.abc import SocketStream

from daemon.protocol.http_client import make_http_client
from tests.fakes.tcp_listener import listening_socket, serve


class RawPeer:
    """The server's side of one accepted connection."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self._buffer = b""

    async def read_request(self) -> bytes | None:
        """One whole request (head and Content-Length body), or None once the client closes."""
        while b"\r\n\r\n" not in self._buffer:
            try:
                self._buffer += await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return None
        head, _, rest = self._buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            try:
                rest += await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return None
        self._buffer = rest[length:]
        return head + b"\r\n\r\n" + rest[:length]

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)


class RawServer:
    """What the server saw: connections accepted and requests read (by `answer_each`)."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.connections = 0
        self.requests: list[bytes] = []


Handler = Callable[[RawPeer, RawServer], Awaitable[None]]


def answer_each(answer: bytes) -> Handler:
    """A handler that answers every request on a connection with `answer`, until the client
    closes it."""

    async def handle(peer: RawPeer, server: RawServer) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)
            await peer.send(answer)

    return handle


def ok(body: bytes = b"{}", *extra: bytes) -> bytes:
    """A plain HTTP/1.1 200 answer with a Content-Length (and `extra` header lines)."""
    lines = [b"HTTP/1.1 200 OK", b"Content-Length: %d" % len(body), *extra]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@contextlib.asynccontextmanager
async def raw_server(handle: Handler) -> AsyncIterator[RawServer]:
    """Serve `handle` on a loopback port for the length of the `async with`; each accepted
    connection is closed when its handler returns."""
    sock = listening_socket()
    server = RawServer(sock.getsockname()[1])

    async def connected(stream: SocketStream) -> None:
        server.connections += 1
        async with stream:
            await handle(RawPeer(stream), server)

    with sock:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve, sock, connected, tg)
            try:
                yield server
            finally:
                tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def client_of(handle: Handler) -> AsyncIterator[tuple[RawServer, httpx.AsyncClient]]:
    """`raw_server(handle)`, and the daemon's HTTP client to it."""
    async with raw_server(handle) as server, make_http_client(server.url, "", "1") as http:
        yield server, http
