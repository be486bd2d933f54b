"""HTTP/1.1 on the wire, client side: a request's head, an answer's head, and the framing of an
answer's body (Content-Length, chunked, or until the server closes; RFC 9112).

Only what the transport (transport.py) needs: no request pipelining, no upgrades, bodies kept
raw (the caller inflates a compressed one under its own cap, daemon/protocol/answers.py).

Why not `h11` (the parser httpcore and uvicorn use): the same transport with h11 writing the
request and reading the answer (one `h11.Connection` per connection, its events read until
`EndOfMessage`) cost more CPU per request against the Multica-faithful server
(tests/benchmarks/bench_request.py, three alternating runs each on the 2-core test machine,
medians): one request after another, a 5-message batch 560 µs here against 683 µs with h11,
a status poll 488 against 690 µs; 20 tasks paced at 500 ms, 693 against 846 µs. About 150 µs a
request, a quarter of its cost: at 200 tasks (240 requests a second) 3-4 % of a core.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import httpx

from daemon.protocol.connection import Connection

HEAD_LIMIT = 64 * 1024
"""Bytes of an answer's status line and headers; past it the answer is refused."""
_LINE_LIMIT = 4096
"""Bytes of one chunk-size line."""
_VERSIONS = (b"HTTP/1.1", b"HTTP/1.0")
_HEX = b"0123456789abcdefABCDEF"
_NO_BODY = (204, 304)


def request_head(method: str, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """The request line and headers, as written on the wire.

    `httpx.LocalProtocolError` (nothing sent) when a line break or NUL in a header would
    write a request other than the one asked for."""
    lines = [b"%s %s HTTP/1.1" % (method.encode("ascii"), target)]
    lines.extend([name + b": " + value for name, value in headers])
    lines.extend((b"", b""))
    head = b"\r\n".join(lines)
    breaks = len(lines) - 1
    if head.count(b"\n") != breaks or head.count(b"\r") != breaks or b"\0" in head:
        raise httpx.LocalProtocolError("a line break or NUL in the request's line or headers")
    return head


@dataclass(frozen=True, slots=True)
class AnswerHead:
    """An answer's status line and headers, and how its body is framed."""

    version: bytes
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    length: int | None
    """Bytes of the body when they are known up front (0 for none); None: chunked, or until
    the server closes."""
    chunked: bool
    keep_alive: bool
    """Whether the connection can carry another request once the body is read."""
    encoded: bool
    """Whether the body has a Content-Encoding (gzip, deflate...)."""


def parse_answer_head(data: bytes, *, head_request: bool = False) -> AnswerHead:
    """The answer head in `data` (without its final blank line); `httpx.RemoteProtocolError`
    when it is not HTTP/1.x."""
    lines = data.split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in _VERSIONS or len(code) != 3 or not code.isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP/1.x status line: {lines[0][:40]!r}")
    status = int(code)
    headers: list[tuple[bytes, bytes]] = []
    lengths: set[bytes] = set()
    codings = b""
    tokens = b""
    encoded = False
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"malformed header line: {line[:40]!r}")
        value = value.strip(b" \t")
        headers.append((name, value))
        lowered = name.lower()
        if lowered == b"content-length":
            lengths.update(part.strip() for part in value.split(b","))
        elif lowered == b"transfer-encoding":
            codings += b"," + value.lower()
        elif lowered == b"connection":
            tokens += b"," + value.lower()
        elif lowered == b"content-encoding":
            encoded = encoded or bool(value)
    connection = {token.strip() for token in tokens.split(b",")}
    keep_alive = b"close" not in connection and (
        version == b"HTTP/1.1" or b"keep-alive" in connection
    )
    length, chunked = _framing(status, lengths, codings, head_request=head_request)
    if (length is None and not chunked) or (codings and lengths):
        # Read until close; or both framings named, which a smuggling proxy may read the
        # other way: this one answer is read by Transfer-Encoding, then the connection goes.
        keep_alive = False
    return AnswerHead(version, status, reason, headers, length, chunked, keep_alive, encoded)


def _framing(
    status: int, lengths: set[bytes], codings: bytes, *, head_request: bool
) -> tuple[int | None, bool]:
    """(Content-Length, chunked) as RFC 9112 section 6.3 orders the rules."""
    if head_request or status < 200 or status in _NO_BODY:
        return 0, False
    if codings:
        last = codings.rsplit(b",", 1)[-1].strip()
        return None, last == b"chunked"  # another final coding: read until close
    if not lengths:
        return None, False
    if len(lengths) != 1:
        raise httpx.RemoteProtocolError("conflicting Content-Length headers")
    (text,) = lengths
    if not text.isdigit() or len(text) > 18:
        raise httpx.RemoteProtocolError(f"malformed Content-Length: {text[:20]!r}")
    return int(text), False


async def receive_answer_head(connection: Connection, *, head_request: bool) -> AnswerHead:
    """The next final answer's head; interim answers (100 Continue, 103 Early Hints) are
    skipped."""
    while True:
        data = await connection.receive_until(b"\r\n\r\n", HEAD_LIMIT)
        head = parse_answer_head(data, head_request=head_request)
        if head.status == 101:
            raise httpx.RemoteProtocolError("the server switched protocols unasked")
        if head.status >= 200:
            return head


class BodyReader:
    """One answer's body read off its connection as its head frames it, raw, piece by piece."""

    def __init__(self, connection: Connection, head: AnswerHead) -> None:
        self._connection = connection
        self._chunked = head.chunked
        self._left = head.length
        """Bytes left: of the body (Content-Length), of the current chunk (chunked), or
        None (until close; chunked before the first size line)."""
        self.done = head.length == 0
        """Whether the body has been read to its end."""

    async def read(self) -> bytes:
        """The next bytes of the body; b"" once it is read to its end. `anyio.EndOfStream`
        when the server closes before the end its framing announced."""
        if self.done:
            return b""
        if self._chunked:
            return await self._read_chunked()
        if self._left is None:  # until close: the end of the stream is the end of the body
            try:
                return await self._connection.receive()
            except anyio.EndOfStream:
                self.done = True
                return b""
        data = await self._connection.receive_some(self._left)
        self._left -= len(data)
        self.done = not self._left
        return data

    async def _read_chunked(self) -> bytes:
        if not self._left:
            closing = self._left == 0  # the CRLF after the last chunk's data comes first
            if closing and await self._connection.receive_exactly(2) != b"\r\n":
                raise httpx.RemoteProtocolError("a chunk's data is not followed by CRLF")
            size = _chunk_size(await self._connection.receive_until(b"\r\n", _LINE_LIMIT))
            if not size:
                await self._skip_trailers()
                self.done = True
                return b""
            self._left = size
        data = await self._connection.receive_some(self._left)
        self._left -= len(data)
        return data

    async def _skip_trailers(self) -> None:
        room = HEAD_LIMIT
        while line := await self._connection.receive_until(b"\r\n", room):
            room -= len(line) + 2


def _chunk_size(line: bytes) -> int:
    """The size on a chunk-size line (its extensions ignored)."""
    text = line.partition(b";")[0].strip(b" \t")
    if not text or len(text) > 15 or text.strip(_HEX):
        raise httpx.RemoteProtocolError(f"malformed chunk size: {line[:20]!r}")
    return int(text, 16)
