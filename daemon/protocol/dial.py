"""Opening a TCP connection: a host's addresses raced as RFC 8305 says, and no socket left
behind, however the race ends.

`loop.create_connection(host, port, happy_eyeballs_delay=...)` races the addresses in tasks of
its own (`asyncio.staggered`); cancelled just as an attempt connected, it dropped that socket
unclosed (Python 3.11): a `ResourceWarning` when collected, in whatever ran then, and a
descriptor held until then. Here every socket the race opens is closed unless it is the one
handed back, and that one too when the race itself is cancelled or fails.
"""

from __future__ import annotations

import socket
from typing import Any

import anyio

HAPPY_EYEBALLS_DELAY = 0.25
"""Seconds before the next address of a host is tried while one is still connecting (RFC 8305;
anyio's `connect_tcp` waits as long)."""

_AddrInfo = tuple[Any, ...]


async def dial(host: str, port: int) -> socket.socket:
    """A connected, non-blocking TCP socket to `host`:`port`. Its addresses are tried in turn,
    the families interleaved, the next one `HAPPY_EYEBALLS_DELAY` after the last began or as
    soon as it failed; the first to connect wins. OSError when none does."""
    infos = _numeric(host, port) or await anyio.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    opened: list[socket.socket] = []
    errors: list[OSError] = []
    won: socket.socket | None = None

    async def attempt(info: _AddrInfo, failed: anyio.Event) -> None:
        nonlocal won
        family, kind, proto, _, address = info
        try:  # a socket that cannot be made (no descriptor left) fails this address alone
            sock = socket.socket(family, kind, proto)
            opened.append(sock)
            sock.setblocking(False)
            await _connect(sock, address)
        except OSError as exc:
            errors.append(exc)
            failed.set()
            return
        if won is None:
            won = sock
            race.cancel_scope.cancel()

    try:
        async with anyio.create_task_group() as race:
            for info in _interleaved(infos):
                failed = anyio.Event()
                race.start_soon(attempt, info, failed)
                with anyio.move_on_after(HAPPY_EYEBALLS_DELAY):
                    await failed.wait()
    except BaseException:
        won = None  # cancelled or failed: the winner, if any, goes with the rest
        raise
    finally:
        for sock in opened:
            if sock is not won:
                sock.close()
    if won is None:
        if len(errors) == 1:
            raise errors[0]
        raise OSError(f"no address of {host}:{port} answered: {'; '.join(map(str, errors))}")
    return won


def _numeric(host: str, port: int) -> list[_AddrInfo]:
    """An address written as one (`127.0.0.1`, `::1`), without the resolver's thread that a
    name needs (asyncio's `create_connection` spares it too); [] for a name."""
    try:
        return list(
            socket.getaddrinfo(
                host,
                port,
                type=socket.SOCK_STREAM,
                proto=socket.IPPROTO_TCP,
                flags=socket.AI_NUMERICHOST,
            )
        )
    except (socket.gaierror, UnicodeError):
        return []


async def _connect(sock: socket.socket, address: Any) -> None:
    """Connect a non-blocking socket; OSError in asyncio's words when it fails."""
    try:
        sock.connect(address)
    except BlockingIOError:
        await anyio.wait_writable(sock)
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise OSError(error, f"Connect call failed {address}") from None


def _interleaved(infos: list[_AddrInfo]) -> list[_AddrInfo]:
    """The addresses with their families taking turns, each family's in the resolver's order
    (RFC 8305, section 4)."""
    by_family: dict[int, list[_AddrInfo]] = {}
    for info in infos:
        by_family.setdefault(info[0], []).append(info)
    families = list(by_family.values())
    return [
        family[i]
        for i in range(max(map(len, families), default=0))
        for family in families
        if i < len(family)
    ]
