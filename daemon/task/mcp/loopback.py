"""A task's loopback HTTP server for one MCP endpoint, built for a hostile neighbour.

Every process on the machine can reach a loopback port, and a web page can make a browser
send requests to one. So: it listens on 127.0.0.1 only; the one path it answers is a random
48-hex-digit token (Multica's shape), compared in constant time, and no other path says more
than 404; a `Host` that is not this address (DNS rebinding) or any `Origin` (a browser's
request) is refused; at most `MAX_CONNECTIONS` connections at once (more are closed at once),
a request head within `HEAD_LIMIT` bytes and `HEAD_WITHIN` seconds, a body within
`BODY_LIMIT` bytes (413 past it) and `BODY_WITHIN` seconds, an idle keep-alive connection
closed after `IDLE_WITHIN`. Only POST reaches the handler; a GET on the path is a 405 (no
event stream), as the MCP transport allows. The handler's answer is sent whole.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import h11
from anyio.abc import SocketAttribute, SocketStream, TaskStatus

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 8
HEAD_LIMIT = 16 * 1024
BODY_LIMIT = 1 << 20
HEAD_WITHIN = 5.0
BODY_WITHIN = 10.0
IDLE_WITHIN = 15.0
SEND_WITHIN = 10.0
_READ = 64 * 1024


@dataclass(frozen=True, slots=True)
class Request:
    """One POST to the endpoint: its headers (names in lower case) and body."""

    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Response:
    """What the handler answers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


class LoopbackEndpoint:
    """One MCP endpoint on 127.0.0.1, at a random path: `url` once it serves."""

    def __init__(self, name: str, handler: Handler) -> None:
        self.name = name
        self._handler = handler
        self._path = "/" + secrets.token_hex(24)
        self._slots = anyio.CapacityLimiter(MAX_CONNECTIONS)
        self.port = 0

    @property
    def url(self) -> str:
        """Where the agent reaches it (the path is the secret)."""
        return f"http://127.0.0.1:{self.port}{self._path}"

    async def serve(self, *, task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; `task_status` gets the URL once it listens."""
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        async with listener, anyio.create_task_group() as tg:
            self.port = listener.extra(SocketAttribute.local_port)
            task_status.started(self.url)
            await listener.serve(self._connection, task_group=tg)

    async def _connection(self, stream: SocketStream) -> None:
        async with stream:
            try:
                self._slots.acquire_on_behalf_of_nowait(stream)
            except anyio.WouldBlock:
                log.warning("%s: connection refused: %d already open", self.name, MAX_CONNECTIONS)
                return
            try:
                await self._requests(stream)
            except (OSError, anyio.EndOfStream, anyio.BrokenResourceError, h11.ProtocolError):
                pass  # the peer went away or spoke no HTTP: its connection ends
            finally:
                self._slots.release_on_behalf_of(stream)

    async def _requests(self, stream: SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        within = HEAD_WITHIN
        while True:
            head = await self._next(stream, conn, within)
            if not isinstance(head, h11.Request):
                return
            headers = {k.decode().lower(): v.decode("latin-1") for k, v in head.headers}
            answer = self._refusal(head, headers)
            if answer is None:
                body, answer = await self._body(stream, conn, headers)
                if answer is None:
                    answer = await self._handler(Request(headers, body))
            # A refusal closes the connection (its body unread): only a served one goes on.
            await self._send(stream, conn, answer)
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
            within = IDLE_WITHIN

    def _refusal(self, head: h11.Request, headers: dict[str, str]) -> Response | None:
        """Why the request is not the handler's (None: it is)."""
        target = head.target.decode("latin-1").split("?", 1)[0]
        if not hmac.compare_digest(target.encode(), self._path.encode()):
            return Response(404, b"not found")
        if headers.get("host") not in (f"127.0.0.1:{self.port}", f"localhost:{self.port}"):
            return Response(403, b"wrong host")
        if "origin" in headers:
            return Response(403, b"no browser requests")
        if head.method != b"POST":
            return Response(405, b"POST only", {"allow": "POST"})
        return None

    async def _body(
        self, stream: SocketStream, conn: h11.Connection, headers: dict[str, str]
    ) -> tuple[bytes, Response | None]:
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > BODY_LIMIT:
            return b"", Response(413, b"request too large")
        chunks: list[bytes] = []
        size = 0
        with anyio.fail_after(BODY_WITHIN):
            while True:
                event = await self._next(stream, conn, BODY_WITHIN)
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > BODY_LIMIT:
                        return b"", Response(413, b"request too large")
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    return b"".join(chunks), None
                else:
                    raise h11.LocalProtocolError("the request ended early")

    async def _next(self, stream: SocketStream, conn: h11.Connection, within: float) -> object:
        with anyio.fail_after(within):
            while True:
                event = conn.next_event()
                if event is not h11.NEED_DATA:
                    return event
                try:
                    data = await stream.receive(_READ)
                except anyio.EndOfStream:
                    data = b""
                conn.receive_data(data)

    async def _send(self, stream: SocketStream, conn: h11.Connection, answer: Response) -> None:
        headers = [
            ("content-length", str(len(answer.body))),
            ("content-type", answer.headers.get("content-type", "text/plain")),
            *((k, v) for k, v in answer.headers.items() if k.lower() != "content-type"),
        ]
        if answer.status >= 400:
            headers.append(("connection", "close"))
        with anyio.fail_after(SEND_WITHIN):
            await stream.send(conn.send(h11.Response(status_code=answer.status, headers=headers)))
            await stream.send(conn.send(h11.Data(data=answer.body)))
            await stream.send(conn.send(h11.EndOfMessage()))
