"""Reading a server's answer with a cap on its size, before and after decompression.

httpx reads a whole answer and inflates it in one go: a 200 KB gzip body can stand for half a
gigabyte. Here the body is streamed, the bytes on the wire are counted against the cap, and a
compressed body is inflated with zlib's `max_length`, so no more than the cap (plus one chunk)
is ever held. A 2xx answer past the cap is `MalformedInputError`; an error answer is only
read for its text, so it is cut at `ERROR_BODY_LIMIT` instead.

What the protocol's parsers read is `Answered`: an `httpx.Response` read whole, or the
daemon's transport's own `Answer` of a small, plain answer (transport.py).
"""

from __future__ import annotations

import codecs
import email.message
import zlib
from dataclasses import dataclass
from typing import Protocol, TypeVar

import anyio
import httpx

from daemon.errors import MalformedInputError

ANSWER_LIMIT = 32 * 1024 * 1024
"""Bytes of one answer, inflated: a claim with 32 tasks and their skills fits many times."""
ERROR_BODY_LIMIT = 64 * 1024
"""Bytes of an error answer read: only the start of its text is ever shown."""
ACCEPT_ENCODING = "gzip, deflate"
"""What the daemon asks for: the encodings it inflates itself (never brotli or zstd)."""
_DROPPED_HEADERS = ("content-encoding", "content-length", "transfer-encoding")


class Answered(Protocol):
    """An answer read whole, as the protocol's parsers and error mapping read it."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def headers(self) -> httpx.Headers: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    @property
    def is_success(self) -> bool: ...


A = TypeVar("A", bound=Answered)


@dataclass(frozen=True, slots=True)
class Answer:
    """A small, plain answer the daemon's transport read whole: what the parsers read of an
    `httpx.Response`, without building one. Nearly every answer of the protocol is one; an
    `httpx.Response` and the read of its body through httpx's decoders cost about 25 µs a
    request, a tenth of a status poll's CPU (tests/benchmarks/bench_request.py)."""

    status_code: int
    reason_phrase: str
    headers: httpx.Headers
    content: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        """The body decoded as httpx decodes it: the Content-Type's charset, else UTF-8."""
        return self.content.decode(_charset(self.headers.get("content-type", "")), "replace")


def _charset(content_type: str) -> str:
    """The codec a Content-Type names (parsed by the email package, as httpx parses it), else
    UTF-8."""
    message = email.message.Message()
    message["content-type"] = content_type
    try:
        return codecs.lookup(message.get_content_charset() or "utf-8").name
    except LookupError:
        return "utf-8"


def capped(answer: A, limit: int) -> A:
    """`answer`, read whole already, when its body is within `limit`; a 2xx past it is
    `MalformedInputError` (an error answer is kept: only its text is ever read)."""
    if answer.is_success and len(answer.content) > limit:
        raise MalformedInputError(f"the answer is larger than {limit} bytes")
    return answer


class _Inflater:
    """One body's decoder: identity, gzip or deflate, never producing more than asked."""

    def __init__(self, encoding: str) -> None:
        name = encoding.strip().lower()
        if name in ("", "identity"):
            self._zlib = None
        elif name in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif name == "deflate":
            self._zlib = zlib.decompressobj()
        else:
            raise MalformedInputError(
                f"the answer's content encoding {name[:20]!r} is not one asked for"
            )

    def feed(self, chunk: bytes, room: int) -> bytes:
        """At most `room + 1` bytes of output for `chunk` (one more says the cap is passed)."""
        if self._zlib is None:
            return chunk
        try:
            out = self._zlib.decompress(chunk, room + 1)
        except zlib.error:
            raise MalformedInputError("the answer's compressed body is corrupt") from None
        if self._zlib.unconsumed_tail:
            return out + b"\0"  # more output is waiting: past the cap whatever it is
        return out


async def read_answer(
    response: httpx.Response, *, limit: int = ANSWER_LIMIT, within: float = 30.0
) -> httpx.Response:
    """`response` (opened with `stream=True`) read whole into a new, decoded response.

    A 2xx body past `limit` raises `MalformedInputError`; any other is cut at
    `ERROR_BODY_LIMIT`. The body must arrive within `within` seconds (a trickling server
    holds no call forever): past it, `httpx.ReadTimeout`.
    """
    cut = not response.is_success
    cap = min(limit, ERROR_BODY_LIMIT) if cut else limit
    declared = response.headers.get("content-length", "")
    if not cut and declared.isdigit() and int(declared) > cap:
        raise MalformedInputError(f"the answer is larger than {cap} bytes")
    if response.is_stream_consumed:  # read already (a transport that answers from memory)
        return capped(response, limit)
    inflater = _Inflater(response.headers.get("content-encoding", ""))
    body = bytearray()
    wire = 0
    with anyio.move_on_after(within) as bounded:
        async for chunk in response.aiter_raw():
            wire += len(chunk)
            body += inflater.feed(chunk, cap - len(body))
            if wire > cap or len(body) > cap:
                if cut:
                    del body[cap:]
                    break
                raise MalformedInputError(f"the answer is larger than {cap} bytes")
    if bounded.cancelled_caught:
        raise httpx.ReadTimeout(
            f"the answer did not arrive within {within:g}s", request=response.request
        )
    headers = [
        (k, v) for k, v in response.headers.multi_items() if k.lower() not in _DROPPED_HEADERS
    ]
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=bytes(body),
        request=response.request,
        extensions=response.extensions,
    )
