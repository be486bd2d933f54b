"""Requests over the control WebSocket, and their answers matched by id (Multica's `rpc-v1`).

    → {"type": "daemon:rpc_request",
       "payload": {"request_id", "method": "tasks.claim", "body": {...}, "timeout_ms": 5000}}
    ← {"type": "daemon:rpc_response",
       "payload": {"request_id", "status": 200, "body": {...}, "error": ""}}

`status` mirrors an HTTP status and `body` the HTTP answer's, so either transport does. A
request goes only on a connection whose server said `rpc-v1` in a heartbeat ack (an older
server drops frames it does not know, and the request would only time out). The server stops
the handler at `timeout_ms` (its work rolled back); the daemon waits that long plus `GRACE`,
so an answer sent at the last moment still arrives before the daemon gives up.

How a request can end, and what the caller may do then:

- an answer: whatever its status, the server said what it did;
- `SocketUnavailableError`: the frame was never written (no connection, `rpc-v1` not said,
  the connection no longer open), so the same request may go over HTTP at once;
- `UnconfirmedError`: the frame was written, then no answer came in time or the connection
  closed: the server may have acted on it, and the caller must not act as if it did not.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic_core import to_json
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from daemon.errors import SocketUnavailableError, UnconfirmedError

log = logging.getLogger(__name__)

RPC_REQUEST = "daemon:rpc_request"
RPC_RESPONSE = "daemon:rpc_response"
RPC_V1 = "rpc-v1"
"""The capability a heartbeat ack names when its connection carries requests."""
GRACE = 2.0
"""Seconds waited past a request's server-side budget (Multica's `wsRPCResponseGrace`)."""


@dataclass(frozen=True, slots=True)
class RpcAnswer:
    """The server's answer to one request: an HTTP-like status, the body, an error text."""

    status: int
    body: Any
    error: str = ""

    @property
    def ok(self) -> bool:
        """A 2xx answer."""
        return 200 <= self.status < 300


class _Pending:
    """One request waiting for its answer (None: the connection closed under it)."""

    __slots__ = ("answer", "done")

    def __init__(self) -> None:
        self.answer: RpcAnswer | None = None
        self.done = anyio.Event()


class ControlCalls:
    """The requests in flight on the control WebSocket and the connection carrying them."""

    def __init__(self) -> None:
        self._ws: ClientConnection | None = None
        self._rpc_v1 = False
        self._pending: dict[str, _Pending] = {}

    @property
    def ready(self) -> bool:
        """A connection is open and its server said `rpc-v1`."""
        return self._ws is not None and self._rpc_v1

    def attach(self, ws: ClientConnection | None) -> None:
        """Carry requests on `ws` from now on (None: on none); requests waiting on the one
        before end unconfirmed, and `rpc-v1` must be said again on the new one."""
        self._ws, self._rpc_v1 = ws, False
        pending, self._pending = self._pending, {}
        for request in pending.values():
            request.done.set()

    def server_said_rpc_v1(self, ws: ClientConnection) -> None:
        """A heartbeat ack on `ws` named `rpc-v1` (an ack of a connection since replaced is not
        taken for the current one)."""
        if ws is self._ws:
            self._rpc_v1 = True

    def deliver(self, request_id: str, answer: RpcAnswer) -> None:
        """The answer to one request; an answer nobody waits for any more is dropped."""
        request = self._pending.get(request_id)
        if request is None:
            log.debug("control rpc: answer to %s came after the request gave up", request_id)
            return
        if not request.done.is_set():
            request.answer = answer
            request.done.set()

    async def call(self, method: str, body: Any, budget: float, grace: float = GRACE) -> RpcAnswer:
        """Send one request with `budget` seconds for the server to act, and wait for its
        answer at most `budget + grace` (see the module's docstring for how it can end)."""
        ws = self._ws
        if ws is None or not self._rpc_v1 or ws.state is not State.OPEN:
            raise SocketUnavailableError(method, "no control connection that carries requests")
        request_id = str(uuid.uuid4())
        payload = {
            "request_id": request_id,
            "method": method,
            "body": body,
            "timeout_ms": int(budget * 1000),
        }
        frame = to_json({"type": RPC_REQUEST, "payload": payload}).decode()
        request = self._pending[request_id] = _Pending()
        try:
            try:
                # The connection is open and nothing awaits before `send` hands the frame to the
                # transport, so from here on the server may have it: never "unsent" again.
                await ws.send(frame)
            except ConnectionClosed:
                why = "the control connection closed while sending"
                raise UnconfirmedError(method, why) from None
            with anyio.move_on_after(budget + grace):
                await request.done.wait()
        finally:
            self._pending.pop(request_id, None)
        if request.answer is None:
            waited = budget + grace
            why = "closed" if request.done.is_set() else f"gave no answer in {waited:g}s"
            raise UnconfirmedError(method, f"the control connection {why}")
        return request.answer
