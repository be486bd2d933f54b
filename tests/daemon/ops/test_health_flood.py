"""The health port's transport under floods of whole heads and bodies cut short (real sockets)."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from daemon.ops.health_http import HttpPort, bind
from daemon.ops.health_request import Reply
from daemon.testing.clock import FakeClock

PATIENCE = 10.0
"""Safety net for every wait below; each event comes within tens of milliseconds here."""


class Recorder:
    """A route that records what it ran on; `POST /slow` blocks until `release` is set."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, bytes]] = []
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(
        self, method: str, path: str, peer: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        with self._lock:
            self.calls.append((method, path, body))
        if path == "/slow":
            self.release.wait(PATIENCE)
        return Reply(200 if method == "GET" else 202, b'{"ok":true}')

    def ran(self, path: str) -> int:
        with self._lock:
            return sum(1 for _, p, _ in self.calls if p == path)


@contextmanager
def serving(route: Recorder, **options: Any) -> Iterator[tuple[HttpPort, int]]:
    """An HTTP port on loopback serving `route`; yields it and its port number."""
    sock = bind("127.0.0.1", 0)
    number = int(sock.getsockname()[1])
    port = HttpPort(sock, route, **options)
    port.start()
    try:
        yield port, number
    finally:
        route.release.set()
        port.stop()


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition` until true; fail naming `what` past the safety net."""
    ends = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < ends, f"timed out waiting for {what}"
        time.sleep(0.01)


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (a reset reads as the end)."""
    sock.settimeout(PATIENCE)
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def probe(port: int) -> bytes:
    """One `GET /healthz` on a fresh connection; its whole answer (b"" when refused)."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return read_all(sock)


def _readable(sock: socket.socket) -> bool:
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


SHUTDOWN_HEAD = b"POST /shutdown HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"


def test_healthz_answers_while_every_slot_holds_a_head_without_its_body() -> None:
    """64 connections each send a whole head announcing a body and then nothing: every
    `/healthz` probe is still answered 200 (they used to be refused until the deadline)."""
    route = Recorder()
    with serving(route, deadline=30.0) as (_, port):
        flood = [socket.create_connection(("127.0.0.1", port)) for _ in range(64)]
        try:
            for sock in flood:
                sock.sendall(SHUTDOWN_HEAD)
            answers = [probe(port) for _ in range(5)]
        finally:
            for sock in flood:
                sock.close()
    assert [a.split(b" ", 2)[1] for a in answers] == [b"200"] * 5, answers
    assert route.ran("/shutdown") == 0


def test_slots_are_kept_for_probes_while_routes_work() -> None:
    """Every slot but the probes' reserve may be a route at work; past that a request is
    answered 503 at once, and `/healthz` still gets its answer."""
    route = Recorder()
    request = b"POST /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\nhi"
    with serving(route, max_connections=8, deadline=30.0) as (_, port):
        held = []
        try:
            for _ in range(8):
                sock = socket.create_connection(("127.0.0.1", port))
                held.append(sock)
                before = route.ran("/slow")
                sock.sendall(request)
                wait_for(
                    lambda s=sock, b=before: route.ran("/slow") > b or _readable(s),
                    "the route to start or the request to be answered",
                )
            at_work = route.ran("/slow")
            answer = probe(port)
            route.release.set()
            refused = [read_all(s) for s in held[at_work:]]
        finally:
            for sock in held:
                sock.close()
    assert at_work == 7
    assert answer.split(b" ", 2)[1] == b"200"
    assert [r.split(b" ", 2)[1] for r in refused] == [b"503"]


def test_a_body_cut_short_by_the_client_is_400_and_the_route_never_runs() -> None:
    """Head announcing 100 bytes, 10 sent, then the client's half-close: 400, no shutdown."""
    route = Recorder()
    with serving(route) as (port_, port):
        with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
            sock.sendall(SHUTDOWN_HEAD + b"x" * 10)
            sock.shutdown(socket.SHUT_WR)
            answer = read_all(sock)
        wait_for(lambda: port_.statistics().open_connections == 0, "the connection to close")
    assert answer.split(b" ", 2)[1] == b"400", answer
    assert route.calls == []


def test_a_body_held_short_until_the_deadline_never_runs_the_route() -> None:
    """Head announcing 100 bytes, 10 sent, the connection held: it is closed at the request
    deadline and `/shutdown` does not run on the 10 bytes."""
    route, clock = Recorder(), FakeClock()
    with serving(route, deadline=1.0, clock=clock) as (port_, port):
        with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
            sock.sendall(SHUTDOWN_HEAD + b"x" * 10)
            wait_for(lambda: port_.statistics().reading_bodies == 1, "the body to be awaited")
            clock.advance(2.0)
            answer = read_all(sock)
        wait_for(lambda: port_.statistics().open_connections == 0, "the connection to close")
    assert b"202" not in answer
    assert route.calls == []
