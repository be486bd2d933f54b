"""A loopback TCP listener for the fakes whose accept loop may be cancelled at any moment.

anyio's listener accepts through asyncio's `loop.sock_accept`. Its callback does not check
whether its future was cancelled meanwhile (unlike `sock_recv`'s): when a client connects in
the same loop iteration as the cancel, the connection is accepted, the result is refused with
InvalidStateError and the new socket is dropped unclosed. That ResourceWarning surfaced in
whichever test ran next (the chaos proxy goes down and up many times a test). Here the loop
waits for the listening socket to be readable and accepts synchronously, so a cancel finds
nothing half-done.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import SocketStream, TaskGroup


def listening_socket(
    port: int = 0, host: str = "127.0.0.1", *, shared: bool = False
) -> socket.socket:
    """A non-blocking socket listening on `host:port` (0: a free port); `shared`: beside the
    port's `reserved_port` socket."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # The port of an earlier listener may still have connections in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if shared:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def reserved_port(host: str = "127.0.0.1") -> socket.socket:
    """A socket bound to a free port of `host` that never listens: connections to the port are
    refused while no `listening_socket(port, shared=True)` listens beside it, and no other
    process (another test's server) can take the port meanwhile (SO_REUSEPORT admits only
    sockets of this user that ask for it too)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # Not SO_REUSEADDR: with it, any socket asking for it too could bind the port while
        # nothing listens.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, 0))
    except BaseException:
        sock.close()
        raise
    return sock


async def serve(
    sock: socket.socket,
    handler: Callable[[SocketStream], Awaitable[object]],
    task_group: TaskGroup,
) -> None:
    """Accept connections on `sock` until cancelled; each is handed to `handler` in
    `task_group`. The caller closes `sock`."""
    while True:
        await anyio.wait_readable(sock)
        try:
            conn, _ = sock.accept()
        except (BlockingIOError, InterruptedError):
            continue  # another accept took it, or the client left first
        try:
            stream = await SocketStream.from_socket(conn)
        except BaseException:
            conn.close()
            raise
        task_group.start_soon(handler, stream)
