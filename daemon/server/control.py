"""The control WebSocket, server side: tells connected daemons at once that a task was queued.

Multica's route, `GET /api/daemon/ws?runtime_ids=<comma-separated>`: the server sends
`{"type": "daemon:task_available", "payload": {"runtime_id", "task_id"}}` to each connection
holding a runtime that may claim the task, and ignores what the daemon sends. A daemon running
this server in its own process subscribes instead (`ControlHub.subscribe`), with no socket.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio.to_thread
from starlette.websockets import WebSocket

from daemon.server.store import Store

log = logging.getLogger(__name__)

TASK_AVAILABLE = "daemon:task_available"


class TaskListener(Protocol):
    """Something in the server's process that wants to hear of queued and cancelled tasks."""

    def task_queued(self, task_id: str) -> None: ...

    def task_cancelled(self, task_id: str) -> None: ...


class ControlHub:
    """The open control connections (each with its runtimes) and the in-process listeners."""

    def __init__(self) -> None:
        # Per connection: runtime id -> (workspace id, backend type), looked up once on connect.
        self._sockets: dict[WebSocket, dict[str, tuple[str, str]]] = {}
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
        for websocket, runtimes in list(self._sockets.items()):
            runtime_id = _serving(runtimes, task)
            if runtime_id is None:
                continue
            frame = {
                "type": TASK_AVAILABLE,
                "payload": {"runtime_id": runtime_id, "task_id": task["id"]},
            }
            try:
                await websocket.send_json(frame)
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
        self._sockets[websocket] = runtimes
        log.info("control channel open for %d of %d runtimes", len(runtimes), len(wanted))
        try:
            while (await websocket.receive())["type"] != "websocket.disconnect":
                pass  # the daemon has nothing to say on this channel; pings are the server's
        finally:
            del self._sockets[websocket]


def _serving(runtimes: dict[str, tuple[str, str]], task: dict[str, Any]) -> str | None:
    """The first of `runtimes` that may claim `task` (the claim's own matching rule)."""
    for runtime_id, (workspace_id, kind) in runtimes.items():
        if workspace_id == task["workspace_id"] and task["backend"] in (None, kind):
            return runtime_id
    return None
