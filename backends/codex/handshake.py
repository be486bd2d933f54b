"""A bound on `codex app-server`'s handshake: initialize, thread/start or resume, turn/start.

A server that never answers its handshake (a model catalogue refresh that hangs, a wedged
start) has said nothing the daemon could call output, so only the first-output budget would
end it, and then as `idle_watchdog`, which it is not. Multica's daemon gives each handshake
request 30 s and names the request that hung; so does this run: past the deadline the message
stream ends and the result says `codex app-server handshake timeout: thread/start did not
respond after 30s`. Leaving the run's context kills the server, as for every run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from backends.base import Message, RunResult
from backends.process import ProcessRun

if TYPE_CHECKING:
    # The session is the run's (backend.py imports it when the first app-server run starts).
    from backends.codex.appserver import AppServerSession

HANDSHAKE_TIMEOUT = 30.0


class HandshakeBoundRun:
    """An `AgentRun` over one app-server process whose handshake must end by a deadline."""

    def __init__(self, run: ProcessRun, session: AppServerSession, timeout: float) -> None:
        self._run = run
        self._session = session
        self._timeout = timeout
        self._deadline = anyio.current_time() + timeout
        self._expired: RunResult | None = None

    @property
    def pid(self) -> int:
        """The server's pid."""
        return self._run.pid

    def messages(self) -> HandshakeBoundRun:
        """The server's messages; they end early when the handshake runs out of time."""
        return self

    def __aiter__(self) -> HandshakeBoundRun:
        return self

    async def __anext__(self) -> Message:
        if self._expired is not None:
            raise StopAsyncIteration
        if self._session.turn_started.is_set():
            return await self._run.__anext__()
        # The deadline nearly always finds the read waiting for bytes, where a cancel loses
        # nothing; one falling inside a read's parse may drop that read's later lines, which
        # only matters when that very read started the turn — then the wait goes on.
        with anyio.move_on_after(self._deadline - anyio.current_time()):
            return await self._run.__anext__()
        if self._session.turn_started.is_set():
            return await self._run.__anext__()
        self._expired = self._session.timed_out(self._timeout)
        raise StopAsyncIteration

    def pending(self) -> int:
        """Messages parsed but not yet taken."""
        return self._run.pending()

    async def close_stdin(self) -> None:
        """Close the server's stdin: it ends once the turn's last line is written."""
        await self._run.close_stdin()

    async def result(self) -> RunResult:
        """The turn's result, or at once the handshake's timeout (the context kills it)."""
        if self._expired is not None:
            return self._expired
        return await self._run.result()
