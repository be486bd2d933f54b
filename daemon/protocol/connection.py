"""One client connection of the HTTP transport: an asyncio transport read by its own protocol,
the bytes read and not yet taken, and whether the peer has closed it.

Why asyncio's transport and protocol, not an anyio stream: an anyio socket stream stops its
transport reading after every receive and starts it again on the next (two `epoll_ctl` calls a
request), and each send and receive passes a checkpoint (another turn of the event loop). Here
the transport reads whenever bytes arrive, into the connection's buffer, until `READ_AHEAD`
bytes wait untaken (then it pauses until they are taken); a write goes straight to the
transport. anyio offers nothing between its streams and a readiness wait per read (which
registers and unregisters the socket just the same), so this module is asyncio's: the daemon
runs on anyio's asyncio backend (`anyio.run`'s default), where the waits below are asyncio
futures that anyio's cancel scopes cancel like any other await; it cannot run on trio. Over
TLS the transport is asyncio's own TLS transport, where it was anyio's TLS stream: at 200 tasks
a server 50 ms away cost 17.0 % of a core against 36.5 % (bench_load --tls). Its protocol is
made here rather than by `loop.create_connection(ssl=...)` only to give it a read buffer of
one TLS record (`TLS_READ_SIZE`) in place of asyncio's 256 KiB, which each connection holds for
its whole life.

`asyncio.sslproto` is private. What this relies on — `SSLProtocol(loop, app_protocol, context,
waiter, server_hostname=...)` and its class attribute `max_size`, the size of the buffer its
`get_buffer` hands the transport — is the same in Python 3.11, 3.12 and 3.13, and CI runs the
TLS tests (tests/daemon/protocol/test_connection_tls.py, which measure the buffer a connection
holds) on the oldest and the newest of them. Should a later Python change it, the public path
replaces `_TlsLayer`: `loop.create_connection(_Protocol, host, port, ssl=tls,
server_hostname=host, happy_eyeballs_delay=...)`, which works the same and costs each
connection asyncio's 256 KiB buffer.
"""

from __future__ import annotations

import asyncio
import select
import ssl
from asyncio import sslproto

import anyio
import httpx

READ_AHEAD = 256 * 1024
"""Bytes read and not yet taken before the transport stops reading (a slow reader of a long
streamed body)."""
HAPPY_EYEBALLS_DELAY = 0.25
"""Seconds before the next address of a host is tried while one is still connecting (RFC 8305;
anyio's `connect_tcp` waits as long)."""
TLS_READ_SIZE = 16 * 1024
"""The TLS layer's read buffer: a TLS record carries at most 16 KiB. asyncio's layer keeps a
256 KiB buffer for each connection's life, and the pool keeps every connection its bursts
opened (40 to 100 at 200 tasks with the server 50-100 ms away): a fifth of the daemon's RSS
there (bench_load 30 200x1 --delay 50ms,100ms --tls: 94-99 MB against 74-76)."""


class _Protocol(asyncio.Protocol):
    """What the transport tells: bytes, the end of the stream, a lost connection, and whether
    writing must wait."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.ended = False
        """Whether the peer closed its side, or the connection is gone."""
        self.error: OSError | None = None
        """What broke the connection (None: nothing, or a clean end)."""
        self._readable: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) >= READ_AHEAD and self.transport is not None:
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> None:
        self.ended = True
        self._wake_reader()  # returning None closes the transport: HTTP never half-closes

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        if exc is not None:
            self.error = exc if isinstance(exc, OSError) else ConnectionError(str(exc))
        self._wake_reader()
        self.resume_writing()

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def more(self) -> None:
        """Until more bytes arrive; `anyio.EndOfStream` (or the error that broke the
        connection) when none will."""
        if self.error is not None:
            raise self.error
        if self.ended:
            raise anyio.EndOfStream
        if self.transport is not None and not self.transport.is_reading():
            self.transport.resume_reading()  # paused at READ_AHEAD, and more is needed
        self._readable = asyncio.get_running_loop().create_future()
        try:
            await self._readable
        finally:
            self._readable = None

    async def drained(self) -> None:
        """Until the transport's write buffer is below its high-water mark."""
        if self._writable is not None:
            await self._writable
        if self.error is not None:
            raise self.error

    def _wake_reader(self) -> None:
        if self._readable is not None and not self._readable.done():
            self._readable.set_result(None)


class _TlsLayer(sslproto.SSLProtocol):
    """asyncio's TLS protocol (what `loop.create_connection(ssl=...)` makes), with a read
    buffer of one record."""

    max_size = TLS_READ_SIZE


async def connect(host: str, port: int, tls: ssl.SSLContext | None) -> Connection:
    """A connection to `host`:`port` (over TLS with `tls`), its addresses tried as anyio's
    `connect_tcp` tries them. OSError (ssl's errors among them) when none answers."""
    loop = asyncio.get_running_loop()
    if tls is None:
        transport, protocol = await loop.create_connection(
            _Protocol, host, port, happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY
        )
        assert isinstance(transport, asyncio.Transport)
        return Connection(transport, protocol)
    protocol = _Protocol()
    handshake = loop.create_future()
    # The layer is made once the socket has connected, as asyncio makes its own: made before,
    # a connect that fails leaves its TLS transport never opened nor closed, and the garbage
    # collector warns of it (a ResourceWarning) later, anywhere.
    raw, _ = await loop.create_connection(
        lambda: _TlsLayer(loop, protocol, tls, handshake, server_hostname=host),
        host,
        port,
        happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
    )
    try:
        await handshake  # the layer hands `protocol` its transport once the handshake is done
    except BaseException:
        raw.close()
        raise
    assert protocol.transport is not None
    return Connection(protocol.transport, protocol)


class Connection:
    """A TCP (or TLS) connection to one origin, read through its own buffer."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._buffer = protocol.buffer
        sock = transport.get_extra_info("socket")
        self._fd: int = -1 if sock is None else sock.fileno()
        self.idle_since = 0.0
        """When it was last given back to the pool (the pool's clock)."""
        self.closed = False

    async def send(self, data: bytes) -> None:
        if self._transport.is_closing():
            raise self._protocol.error or BrokenPipeError("the connection is closed")
        self._transport.write(data)
        await self._protocol.drained()

    async def receive(self) -> bytes:
        """The bytes read but not yet taken, else the next bytes the peer sends.

        `anyio.EndOfStream` once the peer has closed its side."""
        await self._holding(1)
        return self._take(len(self._buffer))

    async def receive_some(self, most: int) -> bytes:
        """Between 1 and `most` bytes; the rest of what arrived stays for the next read."""
        await self._holding(1)
        return self._take(min(most, len(self._buffer)))

    async def receive_exactly(self, size: int) -> bytes:
        """`size` bytes; `anyio.EndOfStream` if the peer closes before."""
        await self._holding(size)
        return self._take(size)

    async def receive_until(self, delimiter: bytes, limit: int) -> bytes:
        """The bytes before `delimiter` (which is consumed too); `httpx.RemoteProtocolError`
        past `limit` bytes without it."""
        buffer = self._buffer
        start = 0
        while (end := buffer.find(delimiter, start)) < 0:
            if len(buffer) > limit:
                raise httpx.RemoteProtocolError(f"no end of line within {limit} bytes")
            start = max(0, len(buffer) - len(delimiter) + 1)
            await self._protocol.more()  # at the end, what was read stays: the error names it
        if end > limit:
            raise httpx.RemoteProtocolError(f"no end of line within {limit} bytes")
        data = self._take(end)
        del buffer[: len(delimiter)]
        return data

    async def _holding(self, size: int) -> None:
        """Until the buffer holds at least `size` bytes."""
        while len(self._buffer) < size:
            await self._protocol.more()

    def _take(self, size: int) -> bytes:
        buffer = self._buffer
        data = bytes(buffer[:size]) if size < len(buffer) else bytes(buffer)
        del buffer[:size]
        return data

    @property
    def has_unread(self) -> bool:
        """Whether bytes past the last answer were read (a server sending what was not asked)."""
        return bool(self._buffer)

    def still_open(self) -> bool:
        """Whether an idle connection can carry another request: nothing unread is waiting
        and the peer has not closed it.

        A server closes idle keep-alive connections on its own timer (uvicorn after 5 s);
        a request written into one of those is lost with no answer, and whether it was read
        is then in doubt. The transport reads as bytes arrive, so an end (or any byte, which
        an idle HTTP/1.1 connection never carries) it has read shows in the buffer and the
        protocol; one the kernel holds that the event loop has not read yet shows as the
        socket being readable (one `poll` with no wait).
        """
        if self.closed or self._buffer or self._protocol.ended or self._transport.is_closing():
            return False
        if self._fd < 0:
            return True
        probe = select.poll()
        probe.register(self._fd, select.POLLIN)
        return not probe.poll(0)

    async def aclose(self) -> None:
        """Close the connection (at once: a cancelled close still closes it)."""
        if not self.closed:
            self.closed = True
            self._transport.close()
