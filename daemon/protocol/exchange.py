"""One request on a keep-alive connection: written, its answer's head read (and its body, when
small and plain), a larger body streamed as it arrives; within httpx's timeouts.

Failures keep whether the request may have reached the server, which the caller (caller.py)
needs: a request not fully written is `WriteError`/`WriteTimeout` (surely unsent); anything
after the request went out is `ReadError`/`ReadTimeout`/`RemoteProtocolError` (maybe stored: a
transcript batch in doubt is never sent again to a server that does not deduplicate).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx

from daemon.protocol.connection import Connection
from daemon.protocol.http1 import AnswerHead, BodyReader, receive_answer_head
from daemon.protocol.pool import ConnectionPool, Origin

SMALL_ANSWER = 64 * 1024
"""Bytes of a plain answer's body read at once with its head; a longer one is streamed."""
ONE_SEND = 64 * 1024
"""Bodies up to this go out in the same `send` as the head (one copy, one write)."""


class AnswerBody(httpx.AsyncByteStream):
    """An answer's body as it arrives, raw (compressed bodies stay compressed)."""

    def __init__(
        self,
        pool: ConnectionPool,
        connection: Connection,
        origin: Origin,
        answer: AnswerHead,
        timeout: float | None,
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._origin = origin
        self._answer = answer
        self._reader = BodyReader(connection, answer)
        self._timeout = timeout
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while not self._reader.done:
            try:
                with anyio.fail_after(self._timeout):
                    chunk = await self._reader.read()
            except Exception as exc:
                raise _mapped_failure(exc, sending=False) from exc
            if chunk:
                yield chunk

    async def aclose(self) -> None:
        # A body read to its end gives the connection back to the pool; one cut short (past
        # its cap, a cancelled call) closes it, so no half-read answer is reused.
        if self._closed:
            return
        self._closed = True
        if self._reader.done:
            await self._pool.release(
                self._connection, self._origin, reusable=self._answer.keep_alive
            )
        else:
            await self._pool.discard(self._connection)


async def exchange(
    connection: Connection,
    head: bytes,
    body: bytes,
    limits: dict[str, float | None],
    *,
    head_request: bool,
) -> tuple[AnswerHead, bytes | None]:
    """Write one request and read its answer's head, and its body too when small and plain
    (else None: it is streamed). Within the write and read timeouts of `limits` (httpx's
    timeout extension): one cancel scope, its deadline moved once the request is written."""
    write, read = limits.get("write"), limits.get("read")
    sending = True
    content = None
    try:
        with anyio.CancelScope(deadline=_deadline(write)) as scope:
            if len(body) <= ONE_SEND:
                await connection.send(head + body)
            else:
                await connection.send(head)
                await connection.send(body)
            sending = False
            if read != write:
                # When equal (the daemon's timeouts) the answer's clock starts with the
                # request, a few µs early, and there is no second timer to set.
                scope.deadline = _deadline(read)
            answer = await receive_answer_head(connection, head_request=head_request)
            if _is_small(answer):
                content = await connection.receive_exactly(answer.length or 0)
        if scope.cancelled_caught:
            raise TimeoutError
    except Exception as exc:
        raise _mapped_failure(exc, sending=sending) from exc
    return answer, content


def _is_small(answer: AnswerHead) -> bool:
    return answer.length is not None and answer.length <= SMALL_ANSWER and not answer.encoded


def _deadline(seconds: float | None) -> float:
    return anyio.current_time() + seconds if seconds is not None else float("inf")


def _mapped_failure(exc: Exception, *, sending: bool) -> Exception:
    """A failure of a request under way as httpx's error, keeping whether it may have reached
    the server (`sending`: not all of it was written)."""
    if isinstance(exc, httpx.TransportError):
        return exc
    if isinstance(exc, TimeoutError):
        if sending:
            return httpx.WriteTimeout("the request was not written in time")
        return httpx.ReadTimeout("no answer in time")
    detail = str(exc) or type(exc).__name__
    if sending:
        return httpx.WriteError(detail)
    if isinstance(exc, anyio.EndOfStream):
        return httpx.RemoteProtocolError(
            "the server closed the connection before the end of its answer"
        )
    return httpx.ReadError(detail)
