"""One connection of the transport against a plain socket on loopback: how it learns the peer
closed, and how it holds back a peer that sends (or a request body) faster than it is read."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from daemon.protocol.connection import READ_AHEAD, Connection, connect
from daemon.testing.waits import wait_for

pytestmark = pytest.mark.anyio

PINNED = 64 * 1024
"""The listener's socket buffers (its accepted sockets inherit them): the server's side holds
little, whatever the machine's TCP settings."""


def _receive_buffer_max() -> int:
    """The most a TCP receive buffer may grow to here (Linux's `tcp_rmem`), else 32 MiB."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        return 32 * 1024 * 1024


LONG = _receive_buffer_max() + 8 * 1024 * 1024
"""More than the daemon's side could hold in the kernel (its receive buffer at its largest)
and in `READ_AHEAD`, with the listener's pinned buffers."""


def without_the_loop() -> None:
    """Let loopback deliver what the peer sent while the event loop does not run: only the
    kernel knows of it then."""
    time.sleep(0.05)


@contextlib.contextmanager
def listener() -> Iterator[socket.socket]:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, PINNED)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, PINNED)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


async def accepted(sock: socket.socket) -> tuple[Connection, socket.socket]:
    """A connection to `sock`, and the server's side of it (accepted at once: the kernel
    completed the handshake before `connect` returned)."""
    connection = await connect("127.0.0.1", sock.getsockname()[1], None)
    peer, _ = sock.accept()
    return connection, peer


async def test_an_end_the_event_loop_has_not_read_yet_stops_reuse() -> None:
    """The server hangs up while the event loop has not yet run: the kernel holds the end,
    and the idle connection is not reused."""
    with listener() as sock:
        connection, peer = await accepted(sock)
        await anyio.sleep(0.05)
        assert connection.still_open()
        peer.close()
        without_the_loop()
        assert not connection.still_open()
        await connection.aclose()


async def test_an_end_the_event_loop_read_stops_reuse_and_ends_the_stream() -> None:
    with listener() as sock:
        connection, peer = await accepted(sock)
        peer.close()
        await wait_for(lambda: not connection.still_open(), what="the end to be read")
        with pytest.raises(anyio.EndOfStream), anyio.fail_after(5):
            await connection.receive()
        await connection.aclose()


async def test_bytes_nobody_asked_for_stop_reuse() -> None:
    with listener() as sock:
        connection, peer = await accepted(sock)
        with peer:
            peer.sendall(b"HTTP/1.1 200 OK\r\n")
            without_the_loop()
            assert not connection.still_open()  # in the kernel
            await anyio.sleep(0.05)
            assert not connection.still_open()  # read into the buffer
            assert connection.has_unread
        await connection.aclose()


async def test_a_reader_that_stops_holds_the_sender_back_and_then_reads_it_all() -> None:
    """A long body nobody reads for a while: the connection stops reading past its read-ahead,
    so the sender blocks (it would finish at once if everything were read into memory); once
    read again, every byte arrives in order."""
    sent = bytes(range(256)) * (LONG // 256)
    with listener() as sock:
        connection, peer = await accepted(sock)
        with peer:
            sender = threading.Thread(target=peer.sendall, args=(sent,), daemon=True)
            sender.start()
            await anyio.sleep(0.5)  # the loop runs, the connection reads what it will
            assert sender.is_alive()
            first = await connection.receive()
            assert len(first) <= READ_AHEAD + 256 * 1024  # what was waiting, and one read more
            parts = [first]
            with anyio.fail_after(30):
                while sum(map(len, parts)) < LONG:
                    parts.append(await connection.receive())
            sender.join(5)
        assert b"".join(parts) == sent
        await connection.aclose()


async def test_a_send_the_peer_does_not_read_waits_within_its_deadline() -> None:
    with listener() as sock:
        connection, peer = await accepted(sock)
        with peer:
            started = time.monotonic()
            with pytest.raises(TimeoutError), anyio.fail_after(0.3):
                await connection.send(b"x" * LONG)
            assert time.monotonic() - started < 5
        await connection.aclose()


async def test_a_reset_is_a_connection_error_that_names_it() -> None:
    with listener() as sock:
        connection, peer = await accepted(sock)
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        peer.close()
        with pytest.raises(ConnectionResetError), anyio.fail_after(5):
            await connection.receive()
        await connection.aclose()
