"""The control WebSocket, server side: tells connected daemons at once that a task was queued,
and answers their heartbeats and claims on the same connection.

Multica's route, `GET /api/daemon/ws?runtime_ids=<comma-separated>`. The server sends
`{"type": "daemon:task_available", "payload": {"runtime_id", "task_id"}}` to each connection
holding a runtime that may claim the task, and answers as Multica's hub does:

- `daemon:heartbeat` `{runtime_id}` for a runtime of the connection: `daemon:heartbeat_ack`
  `{runtime_id, status: "ok", server_capabilities: ["rpc-v1"]}`, or `{status: "runtime_gone",
  runtime_gone: true}` for a runtime the server no longer has;
- `daemon:rpc_request` `{request_id, method: "tasks.claim", body}`: the claim route's work and
  answer as `daemon:rpc_response` `{request_id, status, body}` (an error's `{"error"}` in
  `body`, an unknown method a 404), at most `RPC_IN_FLIGHT` at once per connection.

Anything else the daemon sends is ignored. A daemon running this server in its own process
subscribes instead (`ControlHub.subscribe`), with no socket.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio.to_thread
from anyio.abc import TaskGroup
from pydantic import ValidationError
from starlette.websockets import WebSocket

from daemon.logs import short_id
from daemon.protocol import jsonin
from daemon.server import bodies
from daemon.server.store import NotFoundError, Store

log = logging.getLogger(__name__)

TASK_AVAILABLE = "daemon:task_available"
RPC_IN_FLIGHT = 8
"""Requests one connection may have in flight (Multica's `maxInFlightRPCPerClient`)."""
FRAME_LIMIT = 64 * 1024
"""Bytes of one frame a daemon sends (Multica's hub reads at most this): a claim request
naming every runtime of a machine fits many times."""


class TaskListener(Protocol):
    """Something in the server's process that wants to hear of queued and cancelled tasks."""

    def task_queued(self, task_id: str) -> None: ...

    def task_cancelled(self, task_id: str) -> None: ...


class _Connection:
    """One daemon's connection: its runtimes, and one writer at a time."""

    def __init__(self, websocket: WebSocket, runtimes: dict[str, tuple[str, str]]) -> None:
        self.websocket = websocket
        self.runtimes = runtimes
        """Runtime id -> (workspace id, backend type), looked up once on connect."""
        self.lock = anyio.Lock()
        self.in_flight = 0

    async def send(self, frame: dict[str, Any]) -> None:
        async with self.lock:  # an ack, an answer and a wake-up may be sent at once
            await self.websocket.send_json(frame)


class ControlHub:
    """The open control connections (each with its runtimes) and the in-process listeners."""

    def __init__(self) -> None:
        self._sockets: dict[WebSocket, _Connection] = {}
        self._listeners: list[TaskListener] = []

    def subscribe(self, listener: TaskListener) -> None:
        """Tell `listener` of every queued and cancelled task from now on."""
        self._listeners.append(listener)

    def endpoint(self, store: Store) -> Callable[[WebSocket], Awaitable[None]]:
        """The route's handler over `store`."""

        async def control(websocket: WebSocket) -> None:
            await self._serve(websocket, store)

        return control

    async def task_queued(self, task: dict[str, Any]) -> None:
        """Wake the listeners and each connection with a runtime that may claim `task`."""
        for listener in self._listeners:
            listener.task_queued(task["id"])
        for connection in list(self._sockets.values()):
            runtime_id = _serving(connection.runtimes, task)
            if runtime_id is None:
                continue
            frame = {
                "type": TASK_AVAILABLE,
                "payload": {"runtime_id": runtime_id, "task_id": task["id"]},
            }
            try:
                await connection.send(frame)
            except Exception as exc:  # a connection that went away: its handler drops it
                log.debug("control frame not sent: %r", exc)

    def task_cancelled(self, task_id: str) -> None:
        """Let the in-process listeners stop the task's run now."""
        for listener in self._listeners:
            listener.task_cancelled(task_id)

    async def close(self) -> None:
        """Close every open control connection (its daemon reconnects, polling meanwhile)."""
        for websocket in list(self._sockets):
            try:
                await websocket.close(code=1012)  # "service restart"
            except Exception as exc:
                log.debug("control connection already gone: %r", exc)

    async def _serve(self, websocket: WebSocket, store: Store) -> None:
        wanted = {i for i in websocket.query_params.get("runtime_ids", "").split(",") if i}
        known = await anyio.to_thread.run_sync(store.runtimes)
        runtimes = {r["id"]: (r["workspace_id"], r["type"]) for r in known if r["id"] in wanted}
        await websocket.accept()
        connection = self._sockets[websocket] = _Connection(websocket, runtimes)
        log.info("control channel open for %d of %d runtimes", len(runtimes), len(wanted))
        try:
            async with anyio.create_task_group() as tg:
                while (message := await websocket.receive())["type"] != "websocket.disconnect":
                    text = message.get("text")
                    if text is None and message.get("bytes") is not None:
                        text = message["bytes"]
                    if text is not None:
                        await self._frame(connection, store, text, tg)
                tg.cancel_scope.cancel()
        finally:
            del self._sockets[websocket]

    async def _frame(
        self, connection: _Connection, store: Store, text: str | bytes, tg: TaskGroup
    ) -> None:
        """Act on one frame from the daemon; anything unknown or malformed is ignored."""
        try:
            message = jsonin.loads(text, limit=FRAME_LIMIT, what="a control frame")
        except ValueError:
            return
        if not isinstance(message, dict) or not isinstance(message.get("payload"), dict):
            return
        payload = message["payload"]
        if message.get("type") == "daemon:heartbeat":
            await self._heartbeat(connection, store, payload.get("runtime_id"))
        elif message.get("type") == "daemon:rpc_request":
            request_id = payload.get("request_id")
            if not isinstance(request_id, str) or not request_id:
                return
            if connection.in_flight >= RPC_IN_FLIGHT:
                error = {"error": "too many in-flight rpc requests"}
                await _answer(connection, request_id, 429, error)
                return
            connection.in_flight += 1
            tg.start_soon(self._rpc, connection, store, request_id, payload)

    async def _heartbeat(self, connection: _Connection, store: Store, runtime_id: Any) -> None:
        if not isinstance(runtime_id, str) or runtime_id not in connection.runtimes:
            return  # a runtime this connection did not name gets no answer, as in Multica
        ack: dict[str, Any] = {"runtime_id": runtime_id}
        try:
            await anyio.to_thread.run_sync(store.heartbeat, runtime_id)
        except NotFoundError:
            ack |= {"status": "runtime_gone", "runtime_gone": True}
        else:
            ack |= {"status": "ok", "server_capabilities": ["rpc-v1"]}
        await connection.send({"type": "daemon:heartbeat_ack", "payload": ack})

    async def _rpc(
        self, connection: _Connection, store: Store, request_id: str, payload: dict[str, Any]
    ) -> None:
        try:
            if payload.get("method") != "tasks.claim":
                error = {"error": f"unknown rpc method {payload.get('method')!r}"}
                await _answer(connection, request_id, 404, error)
                return
            try:
                body = bodies.ClaimIn.model_validate(payload.get("body") or {})
            except ValidationError as exc:
                await _answer(connection, request_id, 400, {"error": _first_error(exc)})
                return
            tasks = await anyio.to_thread.run_sync(
                store.claim, body.daemon_id, body.runtime_ids, body.max_tasks
            )
            for t in tasks:
                shown, backend = short_id(t["id"]), t["backend"]
                log.info("task %s dispatched to daemon %s (%s)", shown, body.daemon_id, backend)
            await _answer(connection, request_id, 200, {"tasks": tasks})
        except Exception as exc:  # the connection gone, the store failing: this request only
            log.warning("control rpc %s failed: %r", request_id, exc)
        finally:
            connection.in_flight -= 1


async def _answer(connection: _Connection, request_id: str, status: int, body: Any) -> None:
    payload = {"request_id": request_id, "status": status, "body": body}
    await connection.send({"type": "daemon:rpc_response", "payload": payload})


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    return f"{where}: {first['msg']}"


def _serving(runtimes: dict[str, tuple[str, str]], task: dict[str, Any]) -> str | None:
    """The first of `runtimes` that may claim `task` (the claim's own matching rule)."""
    for runtime_id, (workspace_id, kind) in runtimes.items():
        if workspace_id == task["workspace_id"] and task["backend"] in (None, kind):
            return runtime_id
    return None
