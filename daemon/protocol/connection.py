"""One client connection of the HTTP transport: its byte stream, the bytes read past what was
asked for, and whether an idle one is still open."""

from __future__ import annotations

import socket

import anyio
import httpx
from anyio.abc import ByteStream, SocketAttribute


class Connection:
    """A TCP (or TLS) stream to one origin, read through its own buffer."""

    def __init__(self, stream: ByteStream) -> None:
        self._stream = stream
        self._buffer = b""
        # The transport's socket object stays valid after a close (its fileno is then -1), so
        # it is looked up once; `extra` builds a dict of every attribute on each call.
        self._socket = stream.extra(SocketAttribute.raw_socket, None)
        # As plain ints: the socket object's properties build enum members on every read.
        self._kind = (
            None
            if self._socket is None
            else (int(self._socket.family), int(self._socket.type), self._socket.proto)
        )
        self.idle_since = 0.0
        """When it was last given back to the pool (the pool's clock)."""
        self.closed = False

    async def send(self, data: bytes) -> None:
        await self._stream.send(data)

    async def receive(self) -> bytes:
        """The bytes read but not yet taken, else the next bytes the peer sends.

        `anyio.EndOfStream` once the peer has closed its side."""
        if self._buffer:
            data, self._buffer = self._buffer, b""
            return data
        return await self._stream.receive()

    async def receive_some(self, most: int) -> bytes:
        """Between 1 and `most` bytes; the rest of what arrived stays for the next read."""
        data = await self.receive()
        if len(data) > most:
            data, self._buffer = data[:most], data[most:]
        return data

    async def receive_exactly(self, size: int) -> bytes:
        """`size` bytes; `anyio.EndOfStream` if the peer closes before."""
        parts = []
        while size:
            data = await self.receive_some(size)
            parts.append(data)
            size -= len(data)
        return b"".join(parts)

    async def receive_until(self, delimiter: bytes, limit: int) -> bytes:
        """The bytes before `delimiter` (which is consumed too); `httpx.RemoteProtocolError`
        past `limit` bytes without it."""
        data = bytearray(self._buffer)
        self._buffer = b""
        start = 0
        while (end := data.find(delimiter, start)) < 0:
            if len(data) > limit:
                raise httpx.RemoteProtocolError(f"no end of line within {limit} bytes")
            start = max(0, len(data) - len(delimiter) + 1)
            try:
                data += await self._stream.receive()
            except anyio.EndOfStream:
                self._buffer = bytes(data)  # what was read stays: the error names the cut
                raise
        if end > limit:
            raise httpx.RemoteProtocolError(f"no end of line within {limit} bytes")
        self._buffer = bytes(data[end + len(delimiter) :])
        return bytes(data[:end])

    @property
    def has_unread(self) -> bool:
        """Whether bytes past the last answer were read (a server sending what was not asked)."""
        return bool(self._buffer)

    def still_open(self) -> bool:
        """Whether an idle connection can carry another request: nothing unread is waiting
        and the peer has not closed it.

        A server closes idle keep-alive connections on its own timer (uvicorn after 5 s);
        a request written into one of those is lost with no answer, and whether it was read
        is then in doubt. So before reuse the socket is peeked without blocking: the end of
        the stream (or any byte, which an idle HTTP/1.1 connection never carries) says it
        is done. anyio streams offer no peek and stop reading between receives, so the
        kernel still holds whatever the peer sent since; the peek reads the socket itself,
        through a socket object made on its descriptor and detached again (never closing it).
        """
        if self._buffer or self.closed:
            return False
        if self._socket is None or self._kind is None:  # not a socket: nothing to peek at
            return True
        fd = self._socket.fileno()
        if fd < 0:  # the event loop closed it (a reset)
            return False
        probe = socket.socket(*self._kind, fd)
        try:
            probe.setblocking(False)  # already non-blocking: this only sets the object's mode
            probe.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True  # nothing to read: open and quiet
        except OSError:
            return False
        finally:
            probe.detach()
        return False  # the end of the stream, or bytes nobody asked for

    async def aclose(self) -> None:
        """Close the stream (its transport is closed before any await, so a cancelled close
        still closes it)."""
        if not self.closed:
            self.closed = True
            await self._stream.aclose()
