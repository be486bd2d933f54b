"""The reference server's HTTP routes: the daemon protocol plus the task extensions."""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from daemon.logs import short_id
from daemon.server import bodies
from daemon.server.auth import BearerAuth
from daemon.server.store import ConflictError, NotFoundError, Store

log = logging.getLogger(__name__)

STATUSES = ("queued", "dispatched", "running", "completed", "failed", "cancelled")

_M = TypeVar("_M", bound=BaseModel)
_T = TypeVar("_T")


MAX_BODY = 16 * 1024 * 1024
"""Largest request body read; transcript batches are far smaller (tool output is capped)."""


class BadRequestError(Exception):
    """The request cannot be understood; answered 400 with this message."""


class BodyTooLargeError(Exception):
    """The request body exceeds the app's limit; answered 413 without reading the rest."""


def create_app(store: Store, token: str = "", *, max_body: int = MAX_BODY) -> Starlette:
    """The ASGI app over `store`; with a `token`, every request must carry it as a bearer."""
    routes = _Routes(store, max_body)
    daemon = "/api/daemon"
    task = daemon + "/tasks/{task_id}"
    return Starlette(
        routes=[
            Route(daemon + "/workspaces", routes.workspaces, methods=["GET"]),
            Route(daemon + "/register", routes.register, methods=["POST"]),
            Route(
                daemon + "/runtimes/{runtime_id}/recover-orphans", routes.recover, methods=["POST"]
            ),
            Route(daemon + "/heartbeat", routes.heartbeat, methods=["POST"]),
            Route(daemon + "/deregister", routes.deregister, methods=["POST"]),
            Route(daemon + "/tasks/claim", routes.claim, methods=["POST"]),
            Route(task + "/start", routes.start, methods=["POST"]),
            Route(task + "/messages", routes.post_messages, methods=["POST"]),
            Route(task + "/status", routes.status, methods=["GET"]),
            Route(task + "/usage", routes.post_usage, methods=["POST"]),
            Route(task + "/complete", routes.complete, methods=["POST"]),
            Route(task + "/fail", routes.fail, methods=["POST"]),
            Route(task + "/cancel-ack", routes.cancel_ack, methods=["POST"]),
            Route("/api/workspaces", routes.add_workspace, methods=["POST"]),
            Route("/api/tasks", routes.create_task, methods=["POST"]),
            Route("/api/tasks", routes.list_tasks, methods=["GET"]),
            Route("/api/tasks/{task_id}", routes.get_task, methods=["GET"]),
            Route("/api/tasks/{task_id}/messages", routes.get_messages, methods=["GET"]),
            Route("/api/tasks/{task_id}/usage", routes.get_usage, methods=["GET"]),
            Route("/api/tasks/{task_id}/cancel", routes.cancel, methods=["POST"]),
            Route("/api/runtimes", routes.runtimes, methods=["GET"]),
        ],
        middleware=[Middleware(BearerAuth, token=token)],
        exception_handlers={
            BadRequestError: _error_handler(400),
            BodyTooLargeError: _error_handler(413),
            NotFoundError: _error_handler(404),
            ConflictError: _error_handler(409),
            # SQLite gave up waiting for its write lock: transient, the daemon retries.
            sqlite3.OperationalError: _error_handler(503, "storage busy"),
            HTTPException: _http_error,
            Exception: _error_handler(500, "internal server error"),
        },
    )


class _Routes:
    """One handler per endpoint; each parses, runs one store call in a thread, and answers."""

    def __init__(self, store: Store, max_body: int) -> None:
        self._store = store
        self._max_body = max_body

    async def _call(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    # -- the daemon protocol -------------------------------------------------------------------

    async def workspaces(self, request: Request) -> Response:
        return JSONResponse(await self._call(self._store.workspaces))

    async def register(self, request: Request) -> Response:
        body = await _parse(request, bodies.RegisterIn, self._max_body)
        runtimes = await self._call(
            self._store.register,
            daemon_id=body.daemon_id,
            workspace_id=body.workspace_id,
            runtimes=body.runtimes,
            device_name=body.device_name,
            cli_version=body.cli_version,
        )
        log.info(
            "registered daemon %s in workspace %s: %s",
            body.daemon_id,
            body.workspace_id,
            ", ".join(r["provider"] for r in runtimes) or "no runtimes",
        )
        return JSONResponse(
            {"runtimes": runtimes, "daemon_id": body.daemon_id, "workspace_id": body.workspace_id}
        )

    async def recover(self, request: Request) -> Response:
        await _parse(request, bodies.EmptyIn, self._max_body)
        runtime_id = request.path_params["runtime_id"]
        orphaned = await self._call(self._store.recover_orphans, runtime_id)
        if orphaned:
            log.info("recovered %d orphaned task(s) of runtime %s", orphaned, short_id(runtime_id))
        return JSONResponse({"orphaned": orphaned, "retried": 0})

    async def heartbeat(self, request: Request) -> Response:
        body = await _parse(request, bodies.HeartbeatIn, self._max_body)
        await self._call(self._store.heartbeat, body.runtime_id)
        return JSONResponse({"status": "ok"})

    async def deregister(self, request: Request) -> Response:
        body = await _parse(request, bodies.DeregisterIn, self._max_body)
        count = await self._call(self._store.deregister, body.runtime_ids)
        log.info("deregistered %d runtime(s)", count)
        return JSONResponse({"status": "ok", "deregistered": count})

    async def claim(self, request: Request) -> Response:
        body = await _parse(request, bodies.ClaimIn, self._max_body)
        tasks = await self._call(
            self._store.claim, body.daemon_id, body.runtime_ids, body.max_tasks
        )
        for t in tasks:
            log.info(
                "task %s dispatched to daemon %s (%s)",
                short_id(t["id"]),
                body.daemon_id,
                t["backend"],
            )
        return JSONResponse({"tasks": tasks})

    async def start(self, request: Request) -> Response:
        await _parse(request, bodies.EmptyIn, self._max_body)
        status = await self._call(self._store.start, _task_id(request))
        return JSONResponse({"id": _task_id(request), "status": status})

    async def post_messages(self, request: Request) -> Response:
        body = await _parse(request, bodies.MessagesIn, self._max_body)
        stored = await self._call(self._store.add_messages, _task_id(request), body.messages)
        return JSONResponse({"status": "ok", "stored": stored})

    async def status(self, request: Request) -> Response:
        status = await self._call(self._store.status, _task_id(request))
        return JSONResponse({"id": _task_id(request), "status": status})

    async def post_usage(self, request: Request) -> Response:
        body = await _parse(request, bodies.UsageIn, self._max_body)
        await self._call(self._store.record_usage, _task_id(request), body.usage)
        return JSONResponse({"status": "ok"})

    async def complete(self, request: Request) -> Response:
        body = await _parse(request, bodies.CompleteIn, self._max_body)
        task = await self._call(
            self._store.complete, _task_id(request), body.output, body.session_id, body.work_dir
        )
        log.info("task %s reported completed (now %s)", short_id(task["id"]), task["status"])
        return JSONResponse({"id": task["id"], "status": task["status"]})

    async def fail(self, request: Request) -> Response:
        body = await _parse(request, bodies.FailIn, self._max_body)
        task = await self._call(
            self._store.fail,
            _task_id(request),
            body.error,
            body.failure_reason,
            body.session_id,
            body.work_dir,
        )
        log.info(
            "task %s reported failed: %s (now %s)",
            short_id(task["id"]),
            body.failure_reason or "agent_error",
            task["status"],
        )
        return JSONResponse({"id": task["id"], "status": task["status"]})

    async def cancel_ack(self, request: Request) -> Response:
        await _parse(request, bodies.EmptyIn, self._max_body)
        await self._call(self._store.cancel_ack, _task_id(request))
        return JSONResponse({"status": "ok"})

    # -- reference-server extensions -------------------------------------------------------------

    async def add_workspace(self, request: Request) -> Response:
        body = await _parse(request, bodies.WorkspaceIn, self._max_body)
        workspace = await self._call(self._store.add_workspace, body.name, body.id)
        log.info("workspace %s added", workspace["id"])
        return JSONResponse(workspace, status_code=201)

    async def create_task(self, request: Request) -> Response:
        body = await _parse(request, bodies.TaskIn, self._max_body)
        task = await self._call(
            self._store.create_task,
            body.prompt,
            backend=body.backend,
            workspace_id=body.workspace_id,
            agent=body.agent,
            prior_session_id=body.prior_session_id,
        )
        log.info("task %s queued (%s)", short_id(task["id"]), task["backend"] or "any backend")
        return JSONResponse(task, status_code=201)

    async def list_tasks(self, request: Request) -> Response:
        status = request.query_params.get("status")
        if status is not None and status not in STATUSES:
            raise BadRequestError(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
        limit = _int_param(request, "limit", 1000)
        return JSONResponse(await self._call(self._store.tasks, status, limit))

    async def get_task(self, request: Request) -> Response:
        return JSONResponse(await self._call(self._store.task, _task_id(request)))

    async def get_messages(self, request: Request) -> Response:
        after = _int_param(request, "after_seq", None)
        return JSONResponse(await self._call(self._store.messages, _task_id(request), after))

    async def get_usage(self, request: Request) -> Response:
        return JSONResponse(await self._call(self._store.usage, _task_id(request)))

    async def cancel(self, request: Request) -> Response:
        task = await self._call(self._store.cancel, _task_id(request))
        log.info("task %s cancel requested (now %s)", short_id(task["id"]), task["status"])
        return JSONResponse(task)

    async def runtimes(self, request: Request) -> Response:
        return JSONResponse(await self._call(self._store.runtimes))


def _task_id(request: Request) -> str:
    return str(request.path_params["task_id"])


async def _parse(request: Request, model: type[_M], limit: int) -> _M:
    """The body as `model`; an empty body counts as `{}` (several endpoints take `{}`)."""
    raw = await _read_body(request, limit)
    try:
        # Parsing and validating in one pass inside pydantic-core: a 1,000-message transcript
        # batch costs a fraction of json.loads followed by model_validate.
        return model.model_validate_json(raw if raw.strip() else b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise BadRequestError(f"malformed JSON body: {first['msg']}") from None
        if first["type"] == "model_type" and not first["loc"]:
            raise BadRequestError("the body must be a JSON object") from None
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequestError(f"{where}: {first['msg']}") from None


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused once it grows past `limit` bytes (whatever Content-Length claims)."""
    too_large = BodyTooLargeError(f"request body over {limit} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
    except ClientDisconnect:
        # The client went away mid-body (a daemon stopping mid-post): nothing to answer, and
        # nothing stored; it re-sends with the same seq. Not worth a traceback.
        raise BadRequestError("the client disconnected before the body was complete") from None
    return b"".join(chunks)


def _int_param(request: Request, name: str, default: _T) -> int | _T:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequestError(f"{name} must be an integer, not {raw!r}") from None


def _error_handler(
    status: int, message: str | None = None
) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def handle(request: Request, exc: Exception) -> Response:
        if status >= 500:
            log.error("%s %s failed: %r", request.method, request.url.path, exc)
        return JSONResponse({"error": message or str(exc)}, status_code=status)

    return handle


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse(
        {"error": exc.detail.lower()}, status_code=exc.status_code, headers=exc.headers
    )
