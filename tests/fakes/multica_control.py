"""The control WebSocket of the Multica-faithful test server (`server/internal/daemonws/hub.go`,
its heartbeat handler `HandleDaemonWSHeartbeat` and its RPC handler `DaemonRPCHandler`).

`GET /api/daemon/ws?runtime_ids=a,b` with the daemon's token; refused before the upgrade for a
bad token or a runtime the server does not know. On an open connection the server pushes its
news (queued on `fake.watchers` by the test controls) and answers the daemon's frames:

- `daemon:heartbeat` `{runtime_id, supports_batch_import}` for a runtime of the connection:
  `daemon:heartbeat_ack` `{runtime_id, status: "ok", server_capabilities: ["rpc-v1"], ...}`
  with the pending actions the HTTP heartbeat would hand out; for a deleted runtime `{status:
  "runtime_gone", runtime_gone: true}`; a runtime the connection did not name gets no ack;
- `daemon:rpc_request` `{request_id, method, body, timeout_ms}`: `tasks.claim` is the HTTP
  claim (same body, same answer, the connection's `X-Client-Capabilities`), answered as
  `daemon:rpc_response` `{request_id, status, body}` (a refusal's `{"error"}` in `body`, as
  Go's handler writes it); an unknown method is a 404 with `error`. At most 8 at once per
  connection, a 429 past that.

Test controls (on the fake): `ws_heartbeats = False` leaves heartbeats unanswered (a server
without the handler), `rpc = False` answers every request 503 (no RPC handler);
`drop_answers("tasks.claim")` acts on a claim and sends no answer, `slow_answers("tasks.claim",
s)` holds the answer; `close_control()` closes every connection. Every frame read is kept in
`fake.frames` as a `SeenRequest` whose route is the frame's type without `daemon:`.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from tests.fakes.multica_routes import SeenRequest

if TYPE_CHECKING:
    from tests.fakes.multica_server import MulticaFake

RPC_V1 = "rpc-v1"
RPC_IN_FLIGHT = 8
"""Go's `maxInFlightRPCPerClient`."""
QUEUE = 100
"""Frames queued for one connection before it counts as slow and is evicted."""


class Connection:
    """One open control connection: its runtimes, its queue of frames to send."""

    def __init__(
        self,
        fake: MulticaFake,
        runtimes: frozenset[str],
        send: MemoryObjectSendStream[dict[str, Any] | str],
        capabilities: str,
    ) -> None:
        self.fake = fake
        self.runtimes = runtimes
        self.send = send
        self.capabilities = capabilities
        self.in_flight = 0

    def reply(self, frame: dict[str, Any]) -> None:
        """Queue a reply; dropped when the queue is full or closed (Go's `trySend`)."""
        with contextlib.suppress(
            anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            self.send.send_nowait(frame)

    def frame(self, raw: str, tg: TaskGroup) -> None:
        """Act on one frame the daemon sent."""
        try:
            message = json.loads(raw)
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        kind, payload = message.get("type"), message.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        self.fake.frames.append(
            SeenRequest(str(kind).removeprefix("daemon:"), "/api/daemon/ws", payload)
        )
        if kind == "daemon:heartbeat":
            self._heartbeat(payload)
        elif kind == "daemon:rpc_request":
            self._rpc(payload, tg)

    def _heartbeat(self, payload: dict[str, Any]) -> None:
        runtime_id = payload.get("runtime_id")
        if not self.fake.ws_heartbeats or not isinstance(runtime_id, str) or not runtime_id:
            return
        if runtime_id not in self.runtimes:
            return  # Go logs "heartbeat for unauthorized runtime" and sends nothing
        runtime = self.fake.runtimes.get(runtime_id)
        if runtime is None or runtime.deleted:
            ack = {"runtime_id": runtime_id, "status": "runtime_gone", "runtime_gone": True}
        else:
            batched = payload.get("supports_batch_import") is True
            answer = self.fake.heartbeat_answer(runtime, batched)
            ack = {"runtime_id": runtime_id, **answer, "server_capabilities": [RPC_V1]}
        self.reply({"type": "daemon:heartbeat_ack", "payload": ack})

    def _rpc(self, payload: dict[str, Any], tg: TaskGroup) -> None:
        request_id = payload.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            return
        if not self.fake.rpc:
            self._answer(request_id, 503, None, "rpc handler unavailable")
        elif self.in_flight >= RPC_IN_FLIGHT:
            self._answer(request_id, 429, None, "too many in-flight rpc requests")
        else:
            self.in_flight += 1
            tg.start_soon(self._serve, request_id, payload.get("method"), payload.get("body"))

    async def _serve(self, request_id: str, method: Any, body: Any) -> None:
        try:
            if method != "tasks.claim":
                self._answer(request_id, 404, None, f'unknown rpc method "{method}"')
                return
            status, answer = self.fake.claim_tasks(
                body if isinstance(body, dict) else {}, self.capabilities, "socket"
            )
            if self.fake.take_drop("tasks.claim"):
                return  # claimed; the answer is what gets lost
            if delay := self.fake.delay_of("tasks.claim"):
                await anyio.sleep(delay)
            self._answer(request_id, status, answer, "")
        finally:
            self.in_flight -= 1

    def _answer(self, request_id: str, status: int, body: Any, error: str) -> None:
        payload: dict[str, Any] = {"request_id": request_id, "status": status}
        if body is not None:
            payload["body"] = body
        if error:
            payload["error"] = error
        self.reply({"type": "daemon:rpc_response", "payload": payload})


async def serve_control(fake: MulticaFake, websocket: WebSocket) -> None:
    """`GET /api/daemon/ws?runtime_ids=a,b`: news for those runtimes, answers to the daemon."""
    query = websocket.query_params
    wanted = {
        part.strip()
        for raw in query.getlist("runtime_ids") + query.getlist("runtime_id")
        for part in raw.split(",")
        if part.strip()
    }
    header = websocket.headers.get("authorization")
    if fake.control_redirect:
        fake.requests.append(SeenRequest("ws-redirected", websocket.url.path, header))
        await websocket.send_denial_response(
            Response(status_code=302, headers={"location": fake.control_redirect})
        )
        return
    fake.requests.append(SeenRequest("ws", websocket.url.path, header))
    known = {r.id for r in fake.live_runtimes()}
    if (fake.token and header != f"Bearer {fake.token}") or not wanted or wanted - known:
        # Multica answers 401/400/404 before upgrading; uvicorn turns this into a 403.
        await websocket.close()
        return
    await websocket.accept()
    send, receive = anyio.create_memory_object_stream[dict[str, Any] | str](QUEUE)
    entry = (frozenset(wanted), send)
    fake.watchers.append(entry)
    connection = Connection(
        fake, frozenset(wanted), send, websocket.headers.get("x-client-capabilities", "")
    )
    try:
        async with anyio.create_task_group() as tg, receive:

            async def forward() -> None:
                try:
                    async for frame in receive:
                        if isinstance(frame, str):
                            await websocket.send_text(frame)
                        else:
                            await websocket.send_json(frame)
                except WebSocketDisconnect:
                    pass
                # Evicted, closed by the test, or the daemon went away: the connection ends.
                tg.cancel_scope.cancel()

            tg.start_soon(forward)
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                text = message.get("text")
                if text is None and message.get("bytes") is not None:
                    text = message["bytes"].decode("utf-8", "replace")
                if text is not None:
                    connection.frame(text, tg)
            tg.cancel_scope.cancel()
    finally:
        if entry in fake.watchers:
            fake.watchers.remove(entry)
        send.close()
