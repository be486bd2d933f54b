"""HTTP/1.1 answers as servers frame them: by length, chunked, until close, without a body,
after interim answers; and heads that are not HTTP refused."""

from __future__ import annotations

import httpx
import pytest

from daemon.protocol.http1 import parse_answer_head, request_head
from tests.fakes.raw_http import RawPeer, RawServer, answer_each, client_of, ok

pytestmark = pytest.mark.anyio

CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;name=value\r\nhello\r\n"
    b"7\r\n, world\r\n"
    b"0\r\nX-Trailer: skipped\r\n\r\n"
)


async def test_a_chunked_answer_is_decoded_and_its_connection_kept() -> None:
    """Chunk extensions and trailers are skipped; the next request reuses the connection."""
    async with client_of(answer_each(CHUNKED)) as (server, http):
        first = await http.get("/a")
        second = await http.get("/b")
    assert first.content == second.content == b"hello, world"
    assert server.connections == 1


async def test_an_answer_without_length_is_read_until_close_and_not_reused() -> None:
    """No Content-Length and no chunking: the body ends when the server closes."""

    async def handle(peer: RawPeer, server: RawServer) -> None:
        if await peer.read_request() is not None:
            await peer.send(b"HTTP/1.1 200 OK\r\n\r\nuntil the ")
            await peer.send(b"end")

    async with client_of(handle) as (server, http):
        first = await http.get("/a")
        second = await http.get("/b")
    assert first.content == second.content == b"until the end"
    assert server.connections == 2


async def test_head_and_204_answers_have_no_body_whatever_their_headers_say() -> None:
    """HEAD's Content-Length names the GET's body; 204 has none: neither is waited for."""
    head_answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
    async with client_of(answer_each(head_answer)) as (_, http):
        head = await http.head("/a", timeout=2)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == "100"

    no_content = b"HTTP/1.1 204 No Content\r\n\r\n"
    async with client_of(answer_each(no_content)) as (server, http):
        first = await http.delete("/a", timeout=2)
        second = await http.delete("/b", timeout=2)
    assert first.status_code == second.status_code == 204
    assert server.connections == 1


async def test_interim_answers_are_skipped() -> None:
    """100 Continue and 103 Early Hints come before the answer that counts."""
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
    async with client_of(answer_each(interim + ok(b"done"))) as (_, http):
        answer = await http.get("/a")
    assert (answer.status_code, answer.content) == (200, b"done")
    assert answer.extensions["reason_phrase"] == b"OK"


async def test_a_head_past_64_kib_is_refused() -> None:
    """An endless header block is a protocol error, not an unbounded read."""
    huge = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * (70 * 1024) + b"\r\n\r\n"
    async with client_of(answer_each(huge)) as (_, http):
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get("/a")


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/2 200 OK",
        b"HTTP/1.1 2000 OK",
        b"SSH-2.0-OpenSSH",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1",
        b"HTTP/1.1 200 OK\r\n Folded: line",
        b"HTTP/1.1 200 OK\r\nNo colon here",
    ],
)
def test_a_head_that_is_not_http_1_is_a_protocol_error(head: bytes) -> None:
    """A status line, a length or a header line that does not parse is refused."""
    with pytest.raises(httpx.RemoteProtocolError):
        parse_answer_head(head)


def test_keep_alive_follows_the_version_and_the_connection_header() -> None:
    """1.1 keeps the connection unless `close`; 1.0 only with `keep-alive`; both framings
    named (a smuggling risk) or a body until close never keep it."""
    cases = {
        b"HTTP/1.1 200 OK\r\nContent-Length: 0": True,
        b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0": False,
        b"HTTP/1.0 200 OK\r\nContent-Length: 0": False,
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0": True,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3": False,
        b"HTTP/1.1 200 OK": False,
    }
    assert {head: parse_answer_head(head).keep_alive for head in cases} == cases


def test_a_header_cannot_write_a_second_request() -> None:
    """A line break in a header value is refused before anything is sent."""
    with pytest.raises(httpx.LocalProtocolError):
        request_head("GET", b"/", [(b"X-Id", b"1\r\n\r\nGET /admin HTTP/1.1")])
