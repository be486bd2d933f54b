"""How many connections the embedded server holds, and how long one may take to ask.

uvicorn accepts every connection and waits for its request head for ever: 1,100 idle sockets
under `ulimit -n 1024` left the daemon without descriptors (the API and the health port stopped
answering, and asyncio logged a traceback per failed accept). Here each connection must send its
request head within `HEAD_TIMEOUT` (also between keep-alive requests), and at most
`limit` are open: past it, the oldest connection still waiting for its head is closed to make
room (a real client sends its head at once), and with none such the new one is refused. The
limit sits well below the open-file limit, which `raise_open_file_limit` lifts to the hard
limit first, as servers do, and asyncio accepts only a small batch at a time (the listen
backlog), since what it accepts in one go reaches the guard only after.
"""

from __future__ import annotations

import logging
import resource
from typing import Any, Protocol

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

HEAD_TIMEOUT = 10.0
"""Seconds a connection gets to send a whole request head (first, or after an answer)."""
MAX_CONNECTIONS = 1024
"""Connections held at most when the open-file limit allows more."""
FD_RESERVE = 256
"""Descriptors kept for everything else: agents' pipes, SQLite, logs, the health port."""


class _Timer(Protocol):
    def cancel(self) -> None: ...


def raise_open_file_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard limit; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # a container may forbid it: keep what we have
            log.debug("open-file limit stays at %d: %s", soft, exc)
    return soft


def connection_limit(open_files: int, wanted: int = MAX_CONNECTIONS) -> int:
    """Connections to hold at most with `open_files` descriptors: `wanted`, less when the
    limit leaves too few for the rest of the daemon and the connections accepted but not yet
    counted (`accept_batch`); never under 16."""
    return max(16, min(wanted, (open_files - FD_RESERVE) // 2))


def accept_batch(limit: int) -> int:
    """Connections asyncio accepts in one go (uvicorn's `backlog`): it accepts that many
    before any of them reaches the guard, so a flood could pass the limit by a few batches."""
    return max(8, min(128, limit // 4))


class _Guard:
    """The connections of one server, oldest first."""

    def __init__(self, limit: int, head_timeout: float) -> None:
        self.limit = limit
        self.head_timeout = head_timeout
        self.open: dict[GuardedProtocol, None] = {}
        self.refused = 0

    def admit(self, conn: GuardedProtocol) -> bool:
        """Take `conn` in, making room if needed; False when it must be closed instead."""
        if len(self.open) >= self.limit:
            idle = next((c for c in self.open if c.waiting_for_head), None)
            if idle is None:
                self.refused += 1
                return False
            idle.close("the connection limit was reached")
        self.open[conn] = None
        return True


class GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline and a connection limit."""

    guard: _Guard

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: _Timer | None = None

    @property
    def waiting_for_head(self) -> bool:
        """True while no request is being answered (before the first, between two)."""
        return self.cycle is None or self.cycle.response_complete

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        if not self.guard.admit(self):
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self.waiting_for_head:
            self._disarm()  # a request head is in: the app answers within its own limits

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def handle_websocket_upgrade(self, event: Any) -> None:
        # The connection now belongs to the WebSocket protocol (ping timeouts, the guard's
        # token check before accepting): it leaves this protocol's books.
        self._forget()
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        super().connection_lost(exc)

    def close(self, why: str) -> None:
        """Close this connection now (it waited too long, or made room for another)."""
        log.debug("embedded server: closing a connection: %s", why)
        self._forget()
        if not self.transport.is_closing():
            self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        timeout = self.guard.head_timeout
        self._head_timer = self.loop.call_later(timeout, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.waiting_for_head:
            self.close(f"no request head within {self.guard.head_timeout:g}s")

    def _forget(self) -> None:
        self._disarm()
        self.guard.open.pop(self, None)


def guarded_protocol(limit: int, head_timeout: float = HEAD_TIMEOUT) -> type[GuardedProtocol]:
    """A protocol class for one server: its connections share one limit."""
    return type("Guarded", (GuardedProtocol,), {"guard": _Guard(limit, head_timeout)})
