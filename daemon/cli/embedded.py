"""The embedded reference server as the command line starts it: beside the daemon (`run`)
or alone (`server`), and the token it is reached with.

The server's own modules (uvicorn, starlette, SQLite) are imported only where it starts: a
daemon that talks to a remote server never loads them (about 5 MB of memory it would not use).
"""

from __future__ import annotations

import argparse
import functools
import logging
import signal
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from daemon.addresses import split_host_port
from daemon.config import Settings
from daemon.errors import ConfigError
from daemon.server.token import TOKEN_FILE, ensure_token, read_token

if TYPE_CHECKING:
    from daemon.server.in_process import InProcess

log = logging.getLogger("daemon")


async def start_embedded(settings: Settings, tg: TaskGroup) -> tuple[str, str, InProcess]:
    """Start the embedded server in `tg`: its URL, its token, and what it shares with this
    process (its hub and its app, which answers the daemon without a socket)."""
    # Imported here, not at the top: see the module's docstring.
    from daemon.server.in_process import InProcess
    from daemon.server.serve import serve

    host, port = split_host_port(settings.embedded_listen)
    db = settings.state_dir / "server.db"
    token = await _embedded_token(settings)
    embedded = InProcess()
    started = functools.partial(
        serve, db, host, port, token, embedded, repos=settings.embedded_repos
    )
    url = f"http://{host}:{await tg.start(started)}"
    log.info("embedded server listening on %s (database %s)", url, db)
    return url, token, embedded


async def serve_alone(settings: Settings, args: argparse.Namespace) -> int:
    """The embedded server alone, until SIGINT/SIGTERM."""
    from daemon.server.serve import serve  # only where it runs: see the module's docstring

    host, port = split_host_port(args.listen or settings.embedded_listen)
    db = settings.state_dir / "server.db"
    token = await _embedded_token(settings)
    async with anyio.create_task_group() as tg:
        bound = await tg.start(
            functools.partial(serve, db, host, port, token, repos=settings.embedded_repos)
        )
        # Where a client finds the token, never the token itself.
        source = (
            "MULTICA_DAEMON_TOKEN" if settings.embedded_token else settings.state_dir / TOKEN_FILE
        )
        print(
            f"agent-daemon server listening on http://{host}:{bound} (database {db}, "
            f"token from {source})",
            flush=True,
        )
        await _wait_for_signal()
        tg.cancel_scope.cancel()
    return 0


async def _wait_for_signal() -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
        async for _ in received:
            return


def own_token(settings: Settings) -> str:
    """The daemon's token as this user can read it ('' when it cannot): the health port then
    shows full task and workspace ids instead of handles. Never creates a token file."""
    if not settings.embedded:
        return settings.token
    if settings.embedded_token:
        return settings.embedded_token
    try:
        return read_token(settings.state_dir / TOKEN_FILE)
    except ConfigError:
        return ""


async def _embedded_token(settings: Settings) -> str:
    """MULTICA_DAEMON_TOKEN when set, else the embedded server's generated one (kept 0600);
    never a Multica login token from config.json."""
    if settings.embedded_token:
        return settings.embedded_token
    return await anyio.to_thread.run_sync(ensure_token, settings.state_dir / TOKEN_FILE)
