"""Running the reference server under uvicorn inside the caller's anyio task group."""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import uvicorn
from anyio.abc import TaskStatus

from daemon.addresses import join_host_port, listen
from daemon.errors import ConfigError
from daemon.server.app import create_app
from daemon.server.connections import (
    accept_batch,
    connection_limit,
    guarded_protocol,
    raise_open_file_limit,
)
from daemon.server.database import DEFAULT_WORKSPACE
from daemon.server.in_process import InProcess
from daemon.server.store import Store
from daemon.server.token import TOKEN_FILE, ensure_token

log = logging.getLogger(__name__)

LISTEN_BACKLOG = 128
"""Connections the kernel queues before the server accepts them."""
KEEP_ALIVE = 5
"""Seconds an idle keep-alive connection stays open after an answer."""
SHUTDOWN_GRACE = 5.0
"""Seconds open requests get to finish once the surrounding scope is cancelled."""


class _Server(uvicorn.Server):
    """uvicorn that leaves signals alone (the daemon owns them) and reports when it listens.

    Only public methods are extended, each through `super()`: a uvicorn upgrade that changes
    them fails the tests of this module instead of going unnoticed.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = anyio.Event()

    # uvicorn ≥ 0.29 installs SIGINT/SIGTERM handlers here for the whole process; the daemon
    # must keep its own, so this is a no-op (tests/daemon/server/test_serve.py checks it).
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()


async def serve(
    db_path: Path,
    host: str,
    port: int,
    token: str = "",
    in_process: InProcess | None = None,
    *,
    repos: Sequence[str] = (),
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the reference server until the surrounding scope is cancelled.

    Binds `host:port` itself (port 0 picks a free port) and reports the bound port through
    `task_status` once it accepts connections: `port = await tg.start(serve, path, host, 0)`.
    Every request must carry the token; without one given, it is the one kept in
    `server.token` next to the database (generated there on first start). With `in_process`,
    its hub hears of queued and cancelled tasks and its `app` is set before `started`.
    `repos` replace the default workspace's repository list.
    """
    if not token:
        token = await anyio.to_thread.run_sync(ensure_token, db_path.parent / TOKEN_FILE)
    limit = connection_limit(raise_open_file_limit())
    store = await anyio.to_thread.run_sync(Store, db_path)
    try:
        if repos:
            await anyio.to_thread.run_sync(
                store.set_workspace_repos, DEFAULT_WORKSPACE["id"], repos
            )
        try:
            sock = _bind(host, port)
        except OSError as exc:
            raise ConfigError(f"the embedded server cannot listen on {host}:{port}: {exc}") from exc
        try:
            bound = int(sock.getsockname()[1])
            await _run(_server(store, token, host, in_process, limit), sock, bound, task_status)
        finally:
            sock.close()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(store.close)


@asynccontextmanager
async def running_server(
    db_path: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str = "",
    in_process: InProcess | None = None,
    repos: Sequence[str] = (),
) -> AsyncIterator[str]:
    """Serve for the duration of the `async with` block; yields the base URL.

    Without a `token`, the server's is generated into (or read from) `server.token` beside
    the database.

    `async with running_server(tmp_path / "server.db") as url: ...` — for tests and tools
    that want a real server on loopback without managing a task group themselves.
    """
    async with anyio.create_task_group() as tg:
        bound = await tg.start(
            functools.partial(serve, db_path, host, port, token, in_process, repos=repos)
        )
        try:
            yield f"http://{join_host_port(host, bound)}"
        finally:
            tg.cancel_scope.cancel()


def _server(
    store: Store, token: str, host: str, in_process: InProcess | None, limit: int
) -> _Server:
    hub = in_process.hub if in_process is not None else None
    app = create_app(store, token, listen_host=host, hub=hub)
    if in_process is not None:
        in_process.app = app
    config = uvicorn.Config(
        app,
        log_config=None,  # the daemon configures logging; uvicorn must not replace it
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE) - 1,
        # Bounded connections with a deadline for each request head (connections.py).
        http=guarded_protocol(limit),
        backlog=accept_batch(limit),
        timeout_keep_alive=KEEP_ALIVE,
    )
    return _Server(config)


async def _run(
    server: _Server, sock: socket.socket, bound: int, task_status: TaskStatus[int]
) -> None:
    # uvicorn's serve() is shielded and stopped by its own should_exit flag, so cancellation
    # cannot cut it off between closing the listener and draining connections; the deadline
    # set on the way out keeps that shutdown bounded.
    shield = anyio.CancelScope(shield=True)
    stopped = anyio.Event()

    async def run_uvicorn() -> None:
        try:
            with shield:
                await server.serve(sockets=[sock])
        finally:
            stopped.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_uvicorn)
        try:
            await server.listening.wait()
            # asyncio set the kernel's queue to its small accept batch (connections.py): a
            # queued connection holds no descriptor, so the queue itself may stay long.
            sock.listen(LISTEN_BACKLOG)
            log.info("embedded server listening on %s", _address(sock))
            task_status.started(bound)
            await stopped.wait()
        finally:
            # uvicorn's public stop: its loop sees the flag within its 0.1 s tick.
            server.should_exit = True
            shield.deadline = anyio.current_time() + SHUTDOWN_GRACE
            log.info("embedded server stopping")


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (IPv4 or IPv6, whichever the host resolves to)."""
    sock = listen(host, port)
    sock.setblocking(False)
    return sock


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return join_host_port(host, port)
