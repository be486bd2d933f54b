"""The transport's keep-alive connections: reused while open, never once the server closed
them, closed when an answer is left unread, and bounded in number."""

from __future__ import annotations

import time
from typing import cast

import anyio
import httpx
import pytest

from daemon.errors import MalformedInputError
from daemon.protocol.answers import read_answer
from daemon.protocol.connection import Connection
from daemon.protocol.http_client import make_http_client
from daemon.protocol.pool import ConnectionPool, Origin
from daemon.protocol.transport import Http1Transport
from tests.fakes.raw_http import (
    Handler,
    RawPeer,
    RawServer,
    answer_each,
    client_of,
    ok,
    raw_server,
)

pytestmark = pytest.mark.anyio


async def test_requests_in_turn_share_one_connection() -> None:
    """Five requests one after another: one connection accepted, five requests read."""
    async with client_of(answer_each(ok())) as (server, http):
        for _ in range(5):
            assert (await http.post("/a", content=b"{}")).status_code == 200
    assert (server.connections, len(server.requests)) == (1, 5)


async def test_a_server_closing_idle_connections_never_fails_a_request() -> None:
    """The server drops a connection idle for 0.2 s; each later request opens a new one
    instead of writing into the closed one."""

    async def handle(peer: RawPeer, server: RawServer) -> None:
        while True:
            with anyio.move_on_after(0.2):
                request = await peer.read_request()
                if request is None:
                    return
                server.requests.append(request)
                await peer.send(ok())
                continue
            return  # idle too long: hang up

    async with client_of(handle) as (server, http):
        for _ in range(3):
            assert (await http.post("/a", content=b"{}")).status_code == 200
            await anyio.sleep(0.35)
    assert (server.connections, len(server.requests)) == (3, 3)


async def test_a_connection_idle_past_the_keepalive_expiry_is_not_reused() -> None:
    """An idle connection older than `keepalive_expiry` is closed, though the server would
    still take it."""
    limits = httpx.Limits(max_connections=4, keepalive_expiry=0.1)
    async with (
        raw_server(answer_each(ok())) as server,
        httpx.AsyncClient(base_url=server.url, transport=Http1Transport(limits)) as http,
    ):
        await http.get("/a")
        await http.get("/b")
        await anyio.sleep(0.25)
        await http.get("/c")
    assert (server.connections, len(server.requests)) == (2, 3)


async def test_an_answer_left_unread_closes_its_connection() -> None:
    """An answer past the caller's cap is not read on: its connection is closed, the next
    request gets a new one."""
    chunk = b"400\r\n" + b"x" * 0x400 + b"\r\n"
    big = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk * 64 + b"0\r\n\r\n"
    async with client_of(answer_each(big)) as (server, http):
        for _ in range(2):
            response = await http.send(http.build_request("GET", "/a"), stream=True)
            try:
                with pytest.raises(MalformedInputError):
                    await read_answer(response, limit=2048)
            finally:
                await response.aclose()
    assert server.connections == 2


async def test_a_whole_streamed_answer_gives_its_connection_back() -> None:
    """A body streamed to its end (past the small-answer size) leaves the connection open
    for the next request."""
    body = b"y" * (100 * 1024)
    async with client_of(answer_each(ok(body))) as (server, http):
        for _ in range(2):
            assert (await http.get("/a")).content == body
    assert server.connections == 1


async def test_a_cancelled_request_closes_its_connection() -> None:
    """A request cancelled while waiting for its answer leaves no half-used connection: the
    server sees it closed, and the next request connects anew."""
    closed = anyio.Event()

    async def handle(peer: RawPeer, server: RawServer) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)
            if len(server.requests) > 1:
                await peer.send(ok())
        closed.set()

    async with client_of(handle) as (server, http):
        with anyio.move_on_after(0.2):
            await http.get("/never")
        with anyio.fail_after(5):
            await closed.wait()
        assert (await http.get("/a")).status_code == 200
    assert server.connections == 2


async def test_past_the_connection_limit_a_request_waits_for_a_connection() -> None:
    """Three requests at once through one connection: each waits its turn, all succeed."""

    async def slow(peer: RawPeer, server: RawServer) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)
            await anyio.sleep(0.05)
            await peer.send(ok())

    answers: list[int] = []
    async with (
        raw_server(slow) as server,
        httpx.AsyncClient(
            base_url=server.url, transport=Http1Transport(httpx.Limits(max_connections=1))
        ) as http,
    ):

        async def get() -> None:
            answers.append((await http.get("/a")).status_code)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(get)
    assert answers == [200, 200, 200]
    assert server.connections == 1


async def test_past_the_connection_limit_a_request_waits_then_times_out() -> None:
    """With every connection busy a request waits for one, up to its pool timeout:
    `PoolTimeout`, which surely never reached the server."""
    got = anyio.Event()

    async def silent(peer: RawPeer, server: RawServer) -> None:
        await peer.read_request()
        got.set()
        await anyio.sleep(30)

    limits = httpx.Limits(max_connections=1)
    timeout = httpx.Timeout(10.0, pool=0.2)
    async with (
        raw_server(silent) as server,
        httpx.AsyncClient(
            base_url=server.url, transport=Http1Transport(limits), timeout=timeout
        ) as http,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(http.get, "/busy")
        await got.wait()
        with pytest.raises(httpx.PoolTimeout):
            await http.get("/waits")
        tg.cancel_scope.cancel()
    assert server.connections == 1


def _barrier(together: int) -> Handler:
    """A server that answers no request before `together` have arrived, then each at once:
    what a pool sees of a server a round trip away, where every request holds its connection
    until the answer comes back."""
    arrived = anyio.Event()

    async def handle(peer: RawPeer, server: RawServer) -> None:
        while (request := await peer.read_request()) is not None:
            server.requests.append(request)
            if len(server.requests) >= together:
                arrived.set()
            await arrived.wait()
            await peer.send(ok())

    return handle


async def _sent_at_once(tasks: int, requests: int, answered_after: int) -> tuple[int, int]:
    """`requests` GETs at once from a client sized for `tasks`, at a server answering none
    until `answered_after` have arrived: (connections opened, requests the server read)."""
    async with (
        raw_server(_barrier(answered_after)) as server,
        make_http_client(server.url, "", "1", tasks=tasks) as http,
    ):
        with anyio.fail_after(15):
            async with anyio.create_task_group() as tg:
                for _ in range(requests):
                    tg.start_soon(http.get, "/a")
    return server.connections, len(server.requests)


async def test_each_running_task_gets_its_requests_on_their_way_at_once() -> None:
    """A daemon sized for 30 tasks sends 60 requests at once (a batch and a status poll each):
    the server has all 60 before it answers one, so none waited for a connection. A pool of
    16 carried 16 a round trip: 200 tasks at 100 ms queued without end."""
    assert await _sent_at_once(tasks=30, requests=60, answered_after=60) == (60, 60)


async def test_the_pool_opens_no_more_than_two_connections_a_task_and_sixteen() -> None:
    """Sized for 2 tasks: 30 requests at once get 20 connections (2 a task, 16 shared); the
    other 10 wait for those to come back and reuse them."""
    assert await _sent_at_once(tasks=2, requests=30, answered_after=20) == (20, 30)


async def test_no_more_than_sixteen_connections_are_opened_at_once() -> None:
    """40 requests at once with room for 100 connections: 16 are opened together, the other
    requests wait their turn, and each opens its own once one of those is done (not a
    handshake storm at a server a beat of 200 tasks reaches at once)."""
    gate = anyio.Event()
    opening = peak = 0

    async def connect(origin: Origin, within: float | None) -> Connection:
        nonlocal opening, peak
        opening += 1
        peak = max(peak, opening)
        await gate.wait()
        opening -= 1
        return cast(Connection, object())

    pool = ConnectionPool(httpx.Limits(max_connections=100), connect, time.monotonic)
    got: list[Connection] = []

    async def acquire() -> None:
        got.append(await pool.acquire(("http", "x", 80), wait=None, connect_within=None))

    async with anyio.create_task_group() as tg:
        for _ in range(40):
            tg.start_soon(acquire)
        await anyio.wait_all_tasks_blocked()
        assert (opening, len(got)) == (16, 0)
        gate.set()
    assert (peak, len(got)) == (16, 40)
