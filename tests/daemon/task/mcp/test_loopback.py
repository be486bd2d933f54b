"""A task's loopback MCP endpoint refuses everything but its own client's POSTs."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest

from daemon.task.mcp.loopback import (
    BODY_LIMIT,
    MAX_CONNECTIONS,
    LoopbackEndpoint,
    Request,
    Response,
)
from daemon.testing.waits import wait_for

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def endpoint() -> AsyncIterator[tuple[LoopbackEndpoint, list[Request]]]:
    seen: list[Request] = []

    async def handler(request: Request) -> Response:
        seen.append(request)
        return Response(200, b'{"ok": true}', {"content-type": "application/json"})

    served = LoopbackEndpoint("test", handler)
    async with anyio.create_task_group() as tg:
        await tg.start(served.serve)
        yield served, seen
        tg.cancel_scope.cancel()


async def test_its_client_reaches_it_at_the_secret_path_only() -> None:
    """The POST to its URL is handled, several on one connection; any other path is a bare
    404 and never reaches the handler; the path is 48 random hex digits."""
    async with endpoint() as (served, seen), httpx.AsyncClient() as http:
        first = await http.post(served.url, content=b'{"a": 1}')
        second = await http.post(served.url, content=b"{}")
        wrong = await http.post(served.url[:-1] + "0", content=b"{}")
        root = await http.post(served.url.rsplit("/", 1)[0] + "/", content=b"{}")
    assert (first.status_code, first.json()) == (200, {"ok": True})
    assert second.status_code == 200 and [r.body for r in seen] == [b'{"a": 1}', b"{}"]
    assert wrong.status_code == root.status_code == 404 and wrong.text == "not found"
    path = served.url.rsplit("/", 1)[1]
    assert len(path) == 48 and int(path, 16) >= 0
    assert served.url.startswith("http://127.0.0.1:")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "evil.example"}, 403),  # DNS rebinding: a name that points here
        ({"origin": "https://evil.example"}, 403),  # a web page in a browser
    ],
)
async def test_a_browser_or_a_rebound_name_is_refused(headers: dict[str, str], status: int) -> None:
    """A request naming another host, or sent by a page (it has an Origin), is refused."""
    async with endpoint() as (served, seen), httpx.AsyncClient() as http:
        answer = await http.post(served.url, content=b"{}", headers=headers)
    assert answer.status_code == status and seen == []


async def test_only_post_and_only_so_much() -> None:
    """A GET is a 405 (no event stream); a body past the limit a 413, unread."""
    async with endpoint() as (served, seen), httpx.AsyncClient() as http:
        get = await http.get(served.url)
        big = await http.post(served.url, content=b"x" * (BODY_LIMIT + 1))
    assert get.status_code == 405 and big.status_code == 413 and seen == []


async def test_connections_past_the_bound_are_closed_at_once() -> None:
    """With the bound of connections open, one more is closed unanswered; once one closes,
    requests go through again."""
    async with endpoint() as (served, _):
        held = [
            socket.create_connection(("127.0.0.1", served.port)) for _ in range(MAX_CONNECTIONS)
        ]
        try:
            extra = await anyio.connect_tcp("127.0.0.1", served.port)
            async with extra:
                await extra.send(b"POST / HTTP/1.1\r\nHost: x\r\n\r\n")
                with anyio.fail_after(5):
                    assert await _read_all(extra) == b""
        finally:
            held.pop().close()
        try:
            async with httpx.AsyncClient() as http:

                async def served_again() -> bool:
                    try:
                        return (await http.post(served.url, content=b"{}")).status_code == 200
                    except httpx.HTTPError:
                        return False

                await wait_for(served_again, what="a request served again", within=5)
        finally:
            for sock in held:
                sock.close()


async def _read_all(stream: anyio.abc.SocketStream) -> bytes:
    data = b""
    try:
        while True:
            data += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
        return data
