"""One connection of the transport over TLS, against a TLS server on loopback: what each
connection keeps in memory, and that a body of many records arrives whole."""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import ssl
import threading
import tracemalloc
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import pytest
import trustme

from daemon.protocol.connection import TLS_READ_SIZE, connect
from daemon.testing.waits import wait_for

pytestmark = pytest.mark.anyio

BODY = bytes(range(256)) * 4096
"""1 MiB: 64 TLS records, 64 times the layer's read buffer."""


@dataclass
class TlsServer:
    port: int
    trust: ssl.SSLContext
    """A client context that trusts the server's certificate."""
    peers: list[ssl.SSLSocket] = field(default_factory=list)
    """The server's side of each connection, once its handshake is done."""


@contextlib.contextmanager
def tls_server() -> Iterator[TlsServer]:
    """A TLS server for 127.0.0.1 in a thread, its certificate signed by a fresh authority."""
    authority = trustme.CA()
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    authority.issue_cert("127.0.0.1").configure_cert(serving)
    trust = ssl.create_default_context()
    authority.configure_trust(trust)
    stop = threading.Event()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        sock.settimeout(0.1)
        server = TlsServer(sock.getsockname()[1], trust)

        def serve() -> None:
            while not stop.is_set():
                try:
                    raw, _ = sock.accept()
                except TimeoutError:
                    continue
                raw.settimeout(None)
                try:
                    server.peers.append(serving.wrap_socket(raw, server_side=True))
                except OSError:  # the client refused the handshake
                    raw.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            stop.set()
            thread.join(5)
            for peer in server.peers:
                peer.close()


async def test_a_tls_connection_keeps_a_read_buffer_of_one_record() -> None:
    """asyncio's TLS layer keeps a 256 KiB read buffer for a connection's whole life; the
    pool keeps about a hundred connections at 200 tasks with the server 100 ms away."""
    count = 8
    with tls_server() as server:
        first = await connect("127.0.0.1", server.port, server.trust)  # the caches warmed
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            connections = [
                await connect("127.0.0.1", server.port, server.trust) for _ in range(count)
            ]
            held = (tracemalloc.get_traced_memory()[0] - before) / count
        finally:
            tracemalloc.stop()
        for connection in [first, *connections]:
            await connection.aclose()
    assert held < 4 * TLS_READ_SIZE  # 29 KB here; 274 KB with asyncio's own buffer


async def test_a_body_of_many_records_arrives_whole_each_way() -> None:
    with tls_server() as server:
        connection = await connect("127.0.0.1", server.port, server.trust)
        await wait_for(lambda: len(server.peers) == 1, what="the server's side of the handshake")
        (peer,) = server.peers
        sender = threading.Thread(target=peer.sendall, args=(BODY,), daemon=True)
        sender.start()
        with anyio.fail_after(30):
            answer = await connection.receive_exactly(len(BODY))
        sender.join(5)
        assert answer == BODY

        received = bytearray()

        def receive() -> None:
            while len(received) < len(BODY):
                received.extend(peer.recv(len(BODY) - len(received)))

        receiver = threading.Thread(target=receive, daemon=True)
        receiver.start()
        with anyio.fail_after(30):
            await connection.send(BODY)
        await anyio.to_thread.run_sync(receiver.join, 30)
        assert bytes(received) == BODY
        await connection.aclose()


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_certificate_nobody_trusts_is_refused_and_its_socket_closed() -> None:
    """The handshake's failure is the connection's: an ssl error (an OSError to the transport,
    which names it a connect error)."""
    with tls_server() as server:
        before = open_files()
        with pytest.raises(ssl.SSLCertVerificationError), anyio.fail_after(10):
            await connect("127.0.0.1", server.port, ssl.create_default_context())
        await wait_for(lambda: open_files() == before, what="the socket to be closed")


async def test_a_handshake_cut_short_by_its_deadline_closes_its_socket() -> None:
    """A server that accepts and never answers the handshake: the connect deadline ends the
    wait, and the socket goes with it (asyncio's own handshake timeout is a minute)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # the kernel completes TCP's handshake; nobody speaks TLS
        before = open_files()
        with pytest.raises(TimeoutError), anyio.fail_after(0.3):
            await connect("127.0.0.1", silent.getsockname()[1], ssl.create_default_context())
        await wait_for(lambda: open_files() == before, what="the socket to be closed")


async def test_a_refused_tls_connection_leaves_no_transport_to_collect() -> None:
    """Nothing listens: the connect fails before any TLS, and leaves nothing unclosed for the
    garbage collector to warn about later, in whichever test runs then (the TLS layer was
    made before the socket connected, its transport never opened, never closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(OSError), anyio.fail_after(10):
            await connect("127.0.0.1", port, ssl.create_default_context())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
