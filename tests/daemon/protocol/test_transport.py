"""The HTTP/1.1 transport under the daemon's httpx client: answers as httpx gives them, TLS
and proxies as httpx honours them, and failures that keep whether the request may have
reached the server."""

from __future__ import annotations

import gc
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest
import trustme
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from daemon.protocol.caller import _UNSENT
from daemon.protocol.client import ServerClient
from daemon.protocol.http_client import make_http_client
from tests.fakes.loopback import serve_app
from tests.fakes.raw_http import RawPeer, RawServer, answer_each, ok, raw_server

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
    """Headers, status, body and a 2 MiB request body (written in parts)."""
    body = json.dumps({"text": "x" * (2 * 1024 * 1024)}).encode()
    async with serve_app(APP) as url, make_http_client(url, "tok", "1") as http:
        answer = await http.post("/echo", content=body)
    assert answer.status_code == 201
    assert answer.headers["X-Task-Status"] == "running"
    assert answer.json() == {"bytes": len(body), "auth": "Bearer tok"}


async def test_a_streamed_request_body_goes_out_chunked() -> None:
    """A body httpx only knows as an iterator (no length) is sent with chunked framing."""

    async def parts() -> AsyncIterator[bytes]:
        yield b'{"a": '
        yield b"1}"

    async with serve_app(APP) as url, make_http_client(url, "", "1") as http:
        answer = await http.post("/echo", content=parts())
    assert answer.json() == {"bytes": 8, "auth": None}


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


async def test_an_answer_that_never_comes_is_a_read_timeout() -> None:
    """The server reads the request and stays silent: `ReadTimeout` at the read timeout, an
    error that may have reached the server."""

    async def silent(peer: RawPeer, server: RawServer) -> None:
        await peer.read_request()
        await anyio.sleep(30)

    async with raw_server(silent) as server, make_http_client(server.url, "", "1") as http:
        with pytest.raises(httpx.ReadTimeout) as caught:
            await http.post("/x", content=b"{}", timeout=0.2)
    assert not isinstance(caught.value, _UNSENT)


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The process environment without any proxy variable (the test sets its own)."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    yield monkeypatch


async def test_an_origin_behind_a_proxy_goes_through_it(
    no_proxy_settings: pytest.MonkeyPatch,
) -> None:
    """HTTP_PROXY names a proxy: the request reaches it in absolute form."""
    async with raw_server(answer_each(ok(b"proxied"))) as proxy:
        no_proxy_settings.setenv("HTTP_PROXY", proxy.url)
        async with make_http_client("http://origin.invalid:8080", "", "1") as http:
            answer = await http.get("/api/x?y=1")
    assert answer.content == b"proxied"
    assert proxy.requests[0].startswith(b"GET http://origin.invalid:8080/api/x?y=1 HTTP/1.1")


async def test_a_daemon_call_to_an_origin_behind_a_proxy_goes_through_it(
    no_proxy_settings: pytest.MonkeyPatch,
) -> None:
    """The caller's own way to the transport (`exchange`) leaves a proxied origin to httpx's
    proxy transport: the poll reaches the proxy in absolute form and its answer is read."""
    async with raw_server(answer_each(ok(b'{"status": "running"}'))) as proxy:
        no_proxy_settings.setenv("HTTP_PROXY", proxy.url)
        async with make_http_client("http://origin.invalid:8080", "", "1") as http:
            assert await ServerClient(http).task_status("t1") == "running"
    target = b"GET http://origin.invalid:8080/api/daemon/tasks/t1/status HTTP/1.1"
    assert proxy.requests[0].startswith(target)


async def test_an_origin_named_in_no_proxy_goes_direct(
    no_proxy_settings: pytest.MonkeyPatch,
) -> None:
    """NO_PROXY exempts an origin from HTTP_PROXY."""
    async with (
        raw_server(answer_each(ok(b"proxied"))) as proxy,
        raw_server(answer_each(ok(b"direct"))) as origin,
    ):
        no_proxy_settings.setenv("HTTP_PROXY", proxy.url)
        no_proxy_settings.setenv("NO_PROXY", "127.0.0.1")
        async with make_http_client(origin.url, "", "1") as http:
            answer = await http.get("/x")
    assert answer.content == b"direct"
    assert proxy.connections == 0


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A certificate authority's file, and a key and certificate it signed for 127.0.0.1."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    ca_file, key, cert = tmp_path / "ca.pem", tmp_path / "key.pem", tmp_path / "cert.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    issued.private_key_pem.write_to_path(str(key))
    issued.cert_chain_pems[0].write_to_path(str(cert))
    return ca_file, key, cert


async def test_https_is_verified_against_ssl_cert_file(
    tls_files: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose certificate SSL_CERT_FILE's authority signed is reached over TLS; the
    same server is refused without it (`ConnectError`: nothing was sent)."""
    ca_file, key, cert = tls_files
    async with serve_app(APP, ssl_keyfile=str(key), ssl_certfile=str(cert)) as url:
        https = url.replace("http://", "https://")
        monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
        async with make_http_client(https, "tok", "1") as http:
            answer = await http.post("/echo", content=b"{}")
            again = await http.post("/echo", content=b"{}")
        monkeypatch.delenv("SSL_CERT_FILE")
        async with make_http_client(https, "tok", "1") as http:
            with pytest.raises(httpx.ConnectError) as caught:
                await http.post("/echo", content=b"{}")
    assert answer.json() == again.json() == {"bytes": 2, "auth": "Bearer tok"}
    assert isinstance(caught.value, _UNSENT)


async def test_the_daemons_requests_leave_no_garbage_for_the_collector() -> None:
    """Through the daemon's own client each answer is freed as soon as it is read: httpx's
    `client.send` tied every answer to its stream in a reference cycle, ~20 objects a request
    that only a collection frees (at 240 requests a second, most of the daemon's collections)."""
    requests = 50
    async with (
        raw_server(answer_each(ok(b'{"status": "running"}'))) as server,
        make_http_client(server.url, "tok", "1") as http,
    ):
        client = ServerClient(http)
        await client.task_status("t1")  # the connection and every cache made first
        gc.collect()
        gc.disable()
        try:
            for _ in range(requests):
                assert await client.task_status("t1") == "running"
            unreachable = gc.collect()
        finally:
            gc.enable()
    assert unreachable < requests  # fewer than one object a request; ~1,000 through `send`


async def test_a_closed_client_refuses_and_opens_nothing() -> None:
    """Past the client's close a call fails as httpx's closed client does, and the transport
    opens no new connection that nothing would ever close."""
    async with raw_server(answer_each(ok(b'{"status": "running"}'))) as server:
        async with make_http_client(server.url, "tok", "1") as http:
            client = ServerClient(http)
            await client.task_status("t1")
        with pytest.raises(RuntimeError, match="closed"):
            await client.task_status("t1")
        assert server.connections == 1


class _Streamed(httpx.AsyncByteStream):
    """A body a transport hands over unread, as an in-process (ASGI) transport does."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._body


async def test_an_answer_a_transport_streams_without_its_request_is_read() -> None:
    """A transport's answer need not name its request (httpx's ASGI transport, the embedded
    server's, does not): the caller reads it as `client.send` would have."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_Streamed(b'{"status": "running"}'))

    transport = httpx.MockTransport(answer)
    async with make_http_client("http://server.invalid", "tok", "1", transport=transport) as http:
        assert await ServerClient(http).task_status("t1") == "running"


async def test_a_call_that_asks_for_auth_goes_through_httpxs_own_send() -> None:
    """The daemon's client hands requests straight to its transport only when nothing more is
    asked: a call with its own auth still gets it applied."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Authorization"])
        return httpx.Response(200, json={})

    transport = httpx.MockTransport(answer)
    async with make_http_client("http://server.invalid", "tok", "1", transport=transport) as http:
        await http.get("/plain")
        await http.get("/basic", auth=("user", "pass"))
    assert seen == ["Bearer tok", "Basic dXNlcjpwYXNz"]
