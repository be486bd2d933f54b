"""The health port under hostile clients: web pages, slow-loris floods, odd requests."""

from __future__ import annotations

import select
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import httpx
import pytest

from daemon.ops.health import HealthServer
from daemon.ops.health_request import Reply
from daemon.ops.metrics import Metrics
from daemon.testing import stopped
from tests.daemon.ops.snapshots import idle_snapshot

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]


@asynccontextmanager
async def guarded_port(**options: Any) -> AsyncIterator[tuple[list[str], int]]:
    """A health port with a daemon attached; yields the stop requests it got and its port."""
    stops: list[str] = []
    mounted = options.pop("mount", {})
    server = HealthServer("127.0.0.1:0", Metrics(), **options)
    for path, handler in mounted.items():
        server.mount(path, handler)
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        server.attach(idle_snapshot, lambda: stops.append("stop"))
        yield stops, port
        tg.cancel_scope.cancel()


async def test_shutdown_from_a_web_page_is_refused_and_curl_still_works() -> None:
    """A POST carrying Origin, or a Host that is not loopback, gets 403; a plain POST stops."""
    async with guarded_port() as (stops, port), httpx.AsyncClient(timeout=5) as http:
        url = f"http://127.0.0.1:{port}/shutdown"
        cross_site = await http.post(url, headers={"Origin": "http://evil.example"})
        null_origin = await http.post(url, headers={"Origin": "null"})
        rebound = await http.post(url, headers={"Host": f"evil.example:{port}"})
        stops_after_refusals = len(stops)
        by_name = await http.post(url, headers={"Host": f"localhost:{port}"})
        plain = await http.post(url)
    assert [cross_site.status_code, null_origin.status_code, rebound.status_code] == [403] * 3
    assert "Origin" in cross_site.json()["error"]
    assert stops_after_refusals == 0
    assert (by_name.status_code, plain.status_code) == (202, 202)
    assert stops == ["stop", "stop"]


async def _first_answer(url: str, attempts: int = 20) -> httpx.Response:
    """The first answer `url` gives; a connection closed while the flood drains is retried."""
    async with httpx.AsyncClient(timeout=10) as http:
        for _ in range(attempts - 1):
            try:
                return await http.get(url)
            except httpx.TransportError:
                await anyio.sleep(0.2)
        return await http.get(url)


def _hold_idle_connections(port: int, count: int) -> list[socket.socket]:
    """Open `count` connections that each send one byte of a request and then nothing."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            held.append(sock)
            sock.sendall(b"G")
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return held


def _still_open(socks: list[socket.socket], settle: float = 0.5) -> int:
    """How many of `socks` the server has not closed (a closed one reads as EOF)."""
    time.sleep(settle)
    closed = 0
    for sock in socks:
        if _readable(sock):
            try:
                closed += sock.recv(1) == b""
            except OSError:
                closed += 1
    return len(socks) - closed


def _readable(sock: socket.socket) -> bool:
    """True when `sock` has data or EOF waiting (poll: descriptors here may pass 1024)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


async def test_healthz_answers_while_a_thousand_idle_connections_are_attempted() -> None:
    """1,000 connections that never finish a request: the port holds at most its cap, answers.

    A probe that lands in the middle of the burst can be the connection pushed out (it is
    retried, as a health checker does); every probe is answered 200, none waits on the flood.
    """
    async with guarded_port(max_connections=16, request_deadline=30) as (_, port):
        attack: list[socket.socket] = []

        def attacker() -> None:
            attack.extend(_hold_idle_connections(port, 1000))

        thread = threading.Thread(target=attacker)
        thread.start()
        answers = []
        healthz = f"http://127.0.0.1:{port}/healthz"
        while thread.is_alive():
            answers.append((await _first_answer(healthz)).status_code)
            await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(thread.join)
        answers.append((await _first_answer(healthz)).status_code)
        held = await anyio.to_thread.run_sync(_still_open, attack)
        for sock in attack:
            sock.close()
    assert len(attack) == 1000
    assert answers and set(answers) == {200}
    assert held <= 16


def _trickle(port: int, request: bytes, pause: float, at_once: int = 0) -> tuple[int, bytes]:
    """Send `request` (after its first `at_once` bytes) one byte per `pause`; (bytes sent
    before the server closed, answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request[:at_once])
        for sent in range(at_once, len(request)):
            if _readable(sock):
                return sent, sock.recv(65536)
            try:
                sock.sendall(request[sent : sent + 1])
            except OSError:
                return sent, b""
            time.sleep(pause)
        return len(request), sock.recv(65536)


async def test_a_client_sending_a_byte_at_a_time_is_cut_off_at_the_deadline() -> None:
    """A request that takes longer than the whole-request deadline is closed unanswered."""
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"x" * 60 + b"\r\n\r\n"
    async with guarded_port(request_deadline=0.5) as (_, port):
        # 0.05 s a byte: the whole request would take ~5 s, ten times the deadline.
        sent, answer = await anyio.to_thread.run_sync(_trickle, port, request, 0.05)
    assert sent < len(request) // 2
    assert b"200" not in answer


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


async def test_odd_requests_still_get_414_431_and_413() -> None:
    """An endless request line, too many headers and a huge body are refused, not served."""
    long_line = b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n"
    headers = b"GET /healthz HTTP/1.1\r\n" + b"X: y\r\n" * 150 + b"\r\n"
    body = b"POST /shutdown HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n"
    async with guarded_port() as (stops, port):
        requests = (long_line, headers, body)
        answers = [await anyio.to_thread.run_sync(_raw, port, r) for r in requests]
    assert [a.split(b" ", 2)[1] for a in answers] == [b"414", b"431", b"413"]
    assert stops == []


async def test_running_out_of_file_descriptors_never_stops_the_health_port() -> None:
    """Under a 64-descriptor limit a flood makes accept fail: the port makes room and answers.

    While the listen queue still drains, a probe can lose its connection like any other
    newcomer; it is retried, and must be answered while the flood is still held.
    """
    child = await anyio.open_process(
        [sys.executable, "-m", "tests.daemon.ops.fd_starved_health"], cwd=ROOT
    )
    live: httpx.Response | Exception
    assert child.stdout is not None and child.stderr is not None
    async with child:
        try:
            port = int((await child.stdout.receive()).decode().strip())
            flood = await anyio.to_thread.run_sync(_hold_idle_connections, port, 150)
            try:
                live = await _first_answer(f"http://127.0.0.1:{port}/healthz")
            except httpx.TransportError as exc:
                live = exc
            finally:
                for sock in flood:
                    sock.close()
        finally:
            # The child may have died under the flood: that is a finding, not a cleanup error.
            code = await stopped(child)
        errors = await _all_of(child.stderr)
    # 3 is its exit after our TERM: it served through the whole flood.
    assert code == 3, f"the fd-starved health port exited on its own ({code}):\n{errors}"
    assert isinstance(live, httpx.Response), f"{live!r} from {live.__cause__!r}; child: {errors}"
    assert live.status_code == 200
    assert "out of file descriptors" in errors


async def _all_of(stream: anyio.abc.ByteReceiveStream) -> str:
    """Everything left in `stream` up to its end (the writer has exited)."""
    chunks = []
    with anyio.fail_after(10):
        async for chunk in stream:
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


async def test_a_rebound_host_name_reads_no_route() -> None:
    """A DNS-rebinding page reaches the port under its own name: every route answers it 403
    (no ids, pids or server URL); an address or `localhost` is answered as before."""
    async with guarded_port() as (_, port), httpx.AsyncClient(timeout=5) as http:
        base = f"http://127.0.0.1:{port}"
        rebound = {"Host": f"evil.example:{port}"}
        refused = [
            (await http.get(base + path, headers=rebound)).status_code
            for path in ("/health", "/healthz", "/readyz", "/metrics", "/nowhere")
        ]
        by_name = await http.get(base + "/health", headers={"Host": f"localhost:{port}"})
        by_address = await http.get(base + "/health")
    assert refused == [403] * 5
    assert (by_name.status_code, by_address.status_code) == (200, 200)
    assert by_address.json()["daemon_id"] == "d1"


async def test_a_mounted_route_may_work_past_the_deadline_but_a_slow_body_may_not() -> None:
    """Once a request is in, its route's work (a checkout runs git) is not cut at the request
    deadline; a body trickling in past that deadline still is, unanswered."""

    def slow(method: str, peer: str, headers: Any, body: bytes) -> Reply:
        time.sleep(1.0)
        return Reply(200, b'{"got":' + str(len(body)).encode() + b"}")

    body = b"x" * 40
    head = b"POST /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 40\r\n\r\n"
    async with guarded_port(request_deadline=0.5, mount={"/slow": slow}) as (_, port):
        server_answer = await anyio.to_thread.run_sync(_raw, port, head + body)
        # The head at once, the body at 0.05 s a byte: 2 s, four times the deadline.
        sent, trickled = await anyio.to_thread.run_sync(
            _trickle, port, head + body, 0.05, len(head)
        )
    assert server_answer.startswith(b"HTTP/1.1 200") and server_answer.endswith(b'{"got":40}')
    assert b"200" not in trickled and sent < len(head) + len(body) // 2
