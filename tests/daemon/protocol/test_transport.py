"""The aiohttp transport under the daemon's httpx client: answers as httpx gives them, and
failures that keep whether the request may have reached the server."""

from __future__ import annotations

import json
import socket

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from daemon.protocol.caller import _UNSENT
from daemon.protocol.wire import make_http_client
from tests.fakes.loopback import serve_app

pytestmark = pytest.mark.anyio


async def echo(request: Request) -> Response:
    body = await request.body()
    return JSONResponse(
        {"bytes": len(body), "auth": request.headers.get("authorization")},
        status_code=201,
        headers={"X-Task-Status": "running"},
    )


APP = Starlette(routes=[Route("/echo", echo, methods=["POST"])])


async def test_a_request_and_its_answer_go_through_as_httpx_gives_them() -> None:
    """Headers, status, body and a 2 MiB request body (past aiohttp's 1 MiB bytes limit)."""
    body = json.dumps({"text": "x" * (2 * 1024 * 1024)}).encode()
    async with serve_app(APP) as url, make_http_client(url, "tok", "1") as http:
        answer = await http.post("/echo", content=body)
    assert answer.status_code == 201
    assert answer.headers["X-Task-Status"] == "running"
    assert answer.json() == {"bytes": len(body), "auth": "Bearer tok"}


async def test_a_refused_connection_surely_never_reached_the_server() -> None:
    """Nothing listening: ConnectError, which the caller may send again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    async with make_http_client(f"http://127.0.0.1:{port}", "", "1") as http:
        with pytest.raises(httpx.ConnectError) as caught:
            await http.get("/echo")
    assert isinstance(caught.value, _UNSENT)


async def test_a_connection_closed_after_the_request_may_have_reached_it() -> None:
    """The server reads the whole request and hangs up: an error the caller must not treat
    as unsent (the batch may be stored)."""
    got = anyio.Event()

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data or not data.endswith(b"{}"):
                data += await stream.receive()
            got.set()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        async with make_http_client(f"http://127.0.0.1:{port}", "", "1") as http:
            with pytest.raises(httpx.TransportError) as caught:
                await http.post("/x", content=b"{}")
        tg.cancel_scope.cancel()
    assert got.is_set()
    assert not isinstance(caught.value, _UNSENT)
