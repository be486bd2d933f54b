"""Every way a TLS connect can end short leaves no transport and no descriptor behind.

A transport left unclosed warns only when it is collected (`ResourceWarning: unclosed
transport`), in whatever runs then: a CI run at load failed an unrelated test on one. Each case
here ends connects in one way, the loop stepped so the cut lands at every point of the connect
and the handshake in turn, and then asks the collector for what is left: no warning, no
transport of asyncio's TLS layer still open, and as many descriptors open as before.
"""

from __future__ import annotations

import gc
import os
import socket
import ssl
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import httpx
import pytest
from anyio.lowlevel import checkpoint

from daemon.protocol.connection import connect
from daemon.protocol.transport import Http1Transport
from daemon.testing.waits import wait_for
from tests.daemon.protocol.test_connection_tls import tls_server

pytestmark = pytest.mark.anyio

TURNS = 40
"""Loop turns a connect is cut after, each in turn: TCP's connect, the handshake's round trips
(a thread answers them) and its end all fall within them on loopback."""


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def _open_tls_transports() -> int:
    """asyncio's TLS transports alive and not closed (each warns when collected)."""
    return sum(
        1
        for thing in gc.get_objects()
        if type(thing).__name__ == "_SSLProtocolTransport" and not thing.is_closing()
    )


@asynccontextmanager
async def _nothing_left(server_side: Callable[[], None] = lambda: None) -> AsyncIterator[None]:
    """The body's connects, once the loop has run their closing callbacks, left nothing;
    `server_side` closes what a server in this process keeps of them."""
    files = _open_files()

    def closed() -> bool:
        server_side()
        return _open_files() <= files

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        await wait_for(closed, what="every connection's socket to be closed")
        gc.collect()  # what nothing holds any more warns now, if it was left open
        assert _open_tls_transports() == 0
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []


async def _cut_after(turns: int, connecting: Callable[[], Awaitable[object]]) -> None:
    """Run one connect, cancelled after `turns` turns of the loop unless it ended first."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cut() -> None:
                for _ in range(turns):
                    await checkpoint()
                scope.cancel()

            tg.start_soon(cut)
            try:
                made = await connecting()
            except OSError:  # the peer's doing, or the handshake's
                made = None
            tg.cancel_scope.cancel()
            if made is not None:
                await made.aclose()  # type: ignore[attr-defined]


@contextmanager
def _silent_server() -> Iterator[int]:
    """A port whose kernel completes TCP's handshake; nobody ever speaks TLS on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


@contextmanager
def _hanging_up_server(reset: bool) -> Iterator[int]:
    """A port whose server reads the client's first handshake bytes and hangs up: a FIN, or
    a reset (`reset`)."""
    stop = threading.Event()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.settimeout(0.05)

        def serve() -> None:
            while not stop.is_set():
                try:
                    peer, _ = sock.accept()
                except TimeoutError:
                    continue
                with peer:
                    peer.settimeout(5)
                    try:
                        peer.recv(1)
                    except OSError:
                        continue
                    if reset:
                        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield sock.getsockname()[1]
        finally:
            stop.set()
            thread.join(5)


def _client() -> ssl.SSLContext:
    """A client context that trusts nobody: these handshakes never get that far (and making
    it costs nothing, unlike loading the system's authorities)."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_refused_connect_leaves_nothing() -> None:
    async with _nothing_left():
        for _ in range(3):
            with pytest.raises(OSError):
                await connect("127.0.0.1", _free_port(), _client())


async def test_a_connect_cancelled_at_any_point_of_a_good_handshake_leaves_nothing() -> None:
    """Cut before TCP connects, while the handshake runs, as it ends, or after: closed."""
    with tls_server() as server:

        def close_peers() -> None:
            for peer in server.peers:
                peer.close()

        async with _nothing_left(close_peers):
            for turns in range(TURNS):
                await _cut_after(turns, lambda: connect("127.0.0.1", server.port, server.trust))


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_a_connect_cancelled_while_the_server_is_silent_leaves_nothing(tls: bool) -> None:
    """Cut while TCP connects, or (over TLS) while the handshake waits for an answer."""
    context = _client() if tls else None
    with _silent_server() as port:
        async with _nothing_left():
            for turns in range(TURNS):
                await _cut_after(turns, lambda: connect("127.0.0.1", port, context))


async def test_a_connect_deadline_leaves_nothing() -> None:
    """The transport's connect deadline (`ConnectTimeout`) against a server that never
    answers the handshake."""
    transport = Http1Transport(httpx.Limits())
    with _silent_server() as port:
        async with _nothing_left():
            for within in (0.0, 0.001, 0.01, 0.05):
                with pytest.raises(httpx.ConnectTimeout):
                    await transport._connect(("https", "127.0.0.1", port), within)
    await transport.aclose()


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
async def test_a_peer_hanging_up_mid_handshake_leaves_nothing(reset: bool) -> None:
    with _hanging_up_server(reset) as port:
        async with _nothing_left():
            context = _client()
            for turns in range(0, TURNS, 4):
                await _cut_after(turns, lambda: connect("127.0.0.1", port, context))
            for _ in range(3):  # and uncut: the handshake's own failure
                with pytest.raises(OSError):
                    await connect("127.0.0.1", port, context)
