"""The daemon's calls straight to its own transport (`Http1Transport.exchange`): the request
httpx would write, the answer as httpx would read it, the same caps and errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from daemon.errors import MalformedResponseError, TaskGoneError, TransientServerError
from daemon.protocol.answers import Answer
from daemon.protocol.client import ServerClient
from daemon.protocol.http_client import make_http_client
from daemon.protocol.retry import RetryPolicy
from tests.fakes.raw_http import answer_each, ok, raw_server

pytestmark = pytest.mark.anyio

MESSAGES = [{"seq": 1, "type": "text", "content": "hello"}]
_NO_RETRY = RetryPolicy.never()


def _head_and_body(request: bytes) -> tuple[bytes, set[bytes], bytes]:
    """A request's line, its headers (lower-case names, any order) and its body."""
    head, _, body = request.partition(b"\r\n\r\n")
    line, *headers = head.split(b"\r\n")
    return line, {h.split(b":", 1)[0].lower() + b":" + h.split(b":", 1)[1] for h in headers}, body


async def test_a_call_writes_the_request_httpx_would_write() -> None:
    """A transcript batch and a status poll, sent by the caller, carry the same line, headers
    (Host and Content-Length too) and body as the same requests sent through httpx."""
    async with (
        raw_server(answer_each(ok(b'{"status": "running"}'))) as server,
        make_http_client(server.url, "tok", "1") as http,
    ):
        client = ServerClient(http)
        await client.send_messages("t1", MESSAGES)
        await client.task_status("t1")
        posted = _head_and_body(server.requests[0])
        await http.post(
            "/api/daemon/tasks/t1/messages",
            content=posted[2],
            headers={"Content-Type": "application/json"},
        )
        await http.get("/api/daemon/tasks/t1/status")
    direct_post, direct_get, httpx_post, httpx_get = map(_head_and_body, server.requests)
    assert direct_post == httpx_post
    assert direct_get == httpx_get
    assert json.loads(direct_post[2])["messages"][0]["content"] == "hello"
    assert b"content-length: %d" % len(direct_post[2]) in direct_post[1]
    assert not any(h.startswith(b"content-length") for h in direct_get[1])


_DOWN = (
    b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; charset=latin-1\r\n"
    b"Content-Length: 9\r\n\r\ncaf\xe9 down"
)
_GONE = ok(b'{"error": "task not found"}').replace(b"200 OK", b"404 Not Found")


@pytest.mark.parametrize(
    ("answer", "error", "text"),
    [(_DOWN, TransientServerError, "café down"), (_GONE, TaskGoneError, "task not found")],
    ids=["500 in Latin-1", "404 task not found"],
)
async def test_an_error_answer_is_read_for_its_text_in_its_charset(
    answer: bytes, error: type[Exception], text: str
) -> None:
    """A 500 in Latin-1 is a transient error quoting its text; a 404 naming the task, the
    task gone."""
    async with (
        raw_server(answer_each(answer)) as server,
        make_http_client(server.url, "tok", "1") as http,
    ):
        with pytest.raises(error) as caught:
            await ServerClient(http, policy=_NO_RETRY).task_status("t1")
    assert text in str(caught.value)


async def test_a_2xx_answer_past_the_callers_limit_is_malformed() -> None:
    """The caller's cap holds for an answer read whole by the transport: 20 bytes against 10
    is malformed; an error answer as long is still read for its text."""
    async with (
        raw_server(answer_each(ok(b'{"status": "running"}'))) as big,
        raw_server(answer_each(_GONE)) as missing,
        make_http_client(big.url, "tok", "1") as to_big,
        make_http_client(missing.url, "tok", "1") as to_missing,
    ):
        with pytest.raises(MalformedResponseError, match="larger than 10 bytes"):
            await ServerClient(to_big, answer_limit=10).task_status("t1")
        with pytest.raises(TaskGoneError):
            await ServerClient(to_missing, answer_limit=10).task_status("t1")


async def test_the_daemons_calls_build_no_httpx_request_or_response(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the daemon's own client a small answer costs neither of httpx's objects (about
    50 µs a request): none is built for ten status polls."""
    built: list[str] = []
    for kind in (httpx.Request, httpx.Response):
        original = kind.__init__

        def counting(
            self: object, *args: Any, _kind: Any = kind, _init: Any = original, **kw: Any
        ) -> None:
            built.append(_kind.__name__)
            _init(self, *args, **kw)

        monkeypatch.setattr(kind, "__init__", counting)
    async with (
        raw_server(answer_each(ok(b'{"status": "running"}'))) as server,
        make_http_client(server.url, "tok", "1") as http,
    ):
        client = ServerClient(http)
        for _ in range(10):
            assert await client.task_status("t1") == "running"
    assert built == []


def test_an_answer_in_a_charset_python_does_not_know_reads_as_utf8() -> None:
    """As httpx reads it: the named charset when Python has it, else UTF-8, bad bytes replaced."""
    headers = httpx.Headers({"Content-Type": 'text/plain; charset="x-unknown"'})
    assert Answer(500, "", headers, "café".encode() + b"\xff").text == "café\ufffd"
    latin = httpx.Headers({"Content-Type": "text/plain; Charset=ISO-8859-1"})
    assert Answer(500, "", latin, b"caf\xe9").text == "café"
