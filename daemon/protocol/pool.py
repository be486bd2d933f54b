"""The transport's keep-alive connections: per origin, at most `max_connections` open at once
and `MOST_CONNECTING` being opened, an idle one reused only while it is fresh and still open."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
import httpx

from daemon.protocol.connection import Connection

Origin = tuple[str, str, int]
"""(scheme, host, port)."""
Connect = Callable[[Origin, float | None], Awaitable[Connection]]
"""Opens a connection to an origin within a timeout (seconds, None: no limit)."""
MOST_CONNECTING = 16
"""Connections being opened at once; past that a request waits for one to open or come back.
The pool grows with what is sent at once (up to `max_connections`), but not all in one go: a
beat of 200 tasks opening 200 TLS connections together once overran a server's accept queue,
and a server that slows down would see the daemon answer with more handshakes, each costing
it (and the daemon) more CPU than a request. 16 at a time still open 80 a second to a server
100 ms away (a TCP and a TLS round trip each)."""


class ConnectionPool:
    """Hands out a connection per request: an idle one to the same origin, else a new one
    (`connect`), else waits for one to come back."""

    def __init__(self, limits: httpx.Limits, connect: Connect, clock: Callable[[], float]) -> None:
        self._connect = connect
        self._clock = clock
        self._most = limits.max_connections
        self._most_idle = limits.max_keepalive_connections
        self._expiry = limits.keepalive_expiry if limits.keepalive_expiry is not None else math.inf
        self._idle: dict[Origin, deque[Connection]] = {}
        self._open = 0
        self._connecting = 0
        self._waiting: deque[anyio.Event] = deque()
        self._closed = False

    async def acquire(
        self, origin: Origin, *, wait: float | None, connect_within: float | None
    ) -> Connection:
        """A connection to `origin`; `httpx.PoolTimeout` when none frees within `wait`
        seconds. A new one is given `connect_within` seconds; its errors pass through."""
        connection = await self._take_idle(origin)
        if connection is not None:
            return connection
        if not await self._make_room():
            try:
                with anyio.fail_after(wait):
                    connection = await self._wait_for_room(origin)
            except TimeoutError:
                raise httpx.PoolTimeout(f"no connection free within {wait} s") from None
            if connection is not None:
                return connection
        self._open += 1
        self._connecting += 1
        try:
            connection = await self._connect(origin, connect_within)
        except BaseException:
            self._opened_closed()
            raise
        finally:
            self._connecting -= 1
        self._wake()  # a request waiting for a turn to connect may have it now
        return connection

    async def release(self, connection: Connection, origin: Origin, *, reusable: bool) -> None:
        """Give back a connection whose answer was read to its end: kept for the next
        request if `reusable` (the answer said keep-alive) and nothing past it was read."""
        if not reusable or connection.has_unread or self._closed:
            await self.discard(connection)
            return
        idle = self._idle.setdefault(origin, deque())
        now = self._clock()
        while idle and now - idle[0].idle_since >= self._expiry:
            await self.discard(idle.popleft())
        if self._most_idle is not None and self._idle_count() >= self._most_idle:
            await self.discard(connection)
            return
        connection.idle_since = now
        idle.append(connection)
        self._wake()

    async def discard(self, connection: Connection) -> None:
        """Close a connection that must not carry another request (never reused)."""
        if connection.closed:
            return
        self._opened_closed()
        with anyio.CancelScope(shield=True):  # a cancelled request still closes it
            await connection.aclose()

    async def aclose(self) -> None:
        """Close every idle connection; those in use are closed when given back."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await self.discard(connection)

    async def _wait_for_room(self, origin: Origin) -> Connection | None:
        """Wait until a connection comes back (returned then) or one more may open (None)."""
        while not await self._make_room():
            event = anyio.Event()
            self._waiting.append(event)
            try:
                await event.wait()
            except BaseException:
                if event in self._waiting:
                    self._waiting.remove(event)
                elif event.is_set():  # woken, but leaving: the next waiter gets the turn
                    self._wake()
                raise
            connection = await self._take_idle(origin)
            if connection is not None:
                return connection
        return None

    async def _take_idle(self, origin: Origin) -> Connection | None:
        """The most recently used idle connection to `origin` that is fresh and still open;
        stale ones are closed on the way."""
        idle = self._idle.get(origin)
        now = self._clock()
        while idle:
            connection = idle.pop()
            if now - connection.idle_since < self._expiry and connection.still_open():
                return connection
            await self.discard(connection)
        return None

    async def _make_room(self) -> bool:
        """Whether one more connection may open, closing an idle one to another origin if
        that makes room."""
        if self._connecting >= MOST_CONNECTING:
            return False
        if self._most is None or self._open < self._most:
            return True
        for connections in self._idle.values():
            if connections:
                await self.discard(connections.popleft())
                break
        return self._open < self._most  # another request may have taken it meanwhile

    def _idle_count(self) -> int:
        return sum(len(connections) for connections in self._idle.values())

    def _opened_closed(self) -> None:
        self._open -= 1
        self._wake()

    def _wake(self) -> None:
        if self._waiting:
            self._waiting.popleft().set()
