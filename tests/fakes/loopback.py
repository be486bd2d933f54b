"""Serve an ASGI app on 127.0.0.1 at a free port for the length of an `async with`."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Generator
from typing import Any

import anyio
import uvicorn
from starlette.types import ASGIApp


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the test process's signal handlers alone and says when up."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.up = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.up.set()


@contextlib.asynccontextmanager
async def serve_app(
    app: ASGIApp, *, shutdown_timeout: float = 2.0, **options: Any
) -> AsyncIterator[str]:
    """Run `app` on a loopback port picked by the kernel; yield its base URL. `options` go to
    uvicorn's `Config` (e.g. `http=` a protocol class)."""
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets that say TCP,
    # and accepted ones inherit the listener's protocol. Without it an answer written as head
    # then body waited for the client's delayed ACK: 40 ms a request from the second on (Go's
    # servers, Multica's among them, set TCP_NODELAY on every connection).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=int(shutdown_timeout) or 1,
        **options,
    )
    server = _QuietServer(config)
    # Closed here too: when the test fails, its error cancels serve() before uvicorn's own
    # shutdown closes the socket, and the unclosed listener's ResourceWarning would fail
    # whichever test runs when it is collected.
    with sock:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(10):
                await server.up.wait()
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                # serve() notices should_exit within 0.1 s, then waits for open connections
                # up to the graceful timeout; the deadline only guards against a wedged
                # shutdown.
                server.should_exit = True
                tg.cancel_scope.deadline = anyio.current_time() + shutdown_timeout + 5
