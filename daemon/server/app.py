"""The reference server's app: the daemon protocol's routes here, the user extensions
(daemon/server/user_routes.py) and the control WebSocket (daemon/server/control.py) beside."""

from __future__ import annotations

import logging
import sqlite3

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from daemon.logs import short_id
from daemon.protocol.wire import DAEMON_ID_HEADER, DEDUPE_HEADER, TASK_STATUS_HEADER
from daemon.server import bodies
from daemon.server.auth import RequestGuard
from daemon.server.control import ControlHub
from daemon.server.gc_routes import GcRoutes
from daemon.server.requests import (
    BadRequestError,
    BodyTooLargeError,
    error_handler,
    http_error,
    in_thread,
    parse,
    task_id,
)
from daemon.server.store import ConflictError, NotFoundError, StateError, Store
from daemon.server.user_routes import UserRoutes

log = logging.getLogger(__name__)

MAX_BODY = 16 * 1024 * 1024
"""Largest request body read; transcript batches are far smaller (tool output is capped)."""


class NotHolderError(Exception):
    """A daemon reported on a task another daemon claimed; answered 403."""


def create_app(
    store: Store,
    token: str,
    *,
    listen_host: str = "127.0.0.1",
    max_body: int = MAX_BODY,
    hub: ControlHub | None = None,
) -> Starlette:
    """The ASGI app over `store`; every request must carry `token` as a bearer and pass the
    Host, Origin and Content-Type checks of `RequestGuard` (`listen_host`: the bound address).

    `hub` hears of queued and cancelled tasks (pass one to subscribe in-process listeners)."""
    hub = hub or ControlHub()
    routes = _Routes(store, max_body, hub)
    user = UserRoutes(store, max_body, hub)
    gc = GcRoutes(store, max_body)
    daemon = "/api/daemon"
    task = daemon + "/tasks/{task_id}"
    return Starlette(
        routes=[
            Route(daemon + "/workspaces", routes.workspaces, methods=["GET"]),
            Route(
                daemon + "/workspaces/{workspace_id}/repos", routes.workspace_repos, methods=["GET"]
            ),
            Route(daemon + "/register", routes.register, methods=["POST"]),
            Route(
                daemon + "/runtimes/{runtime_id}/recover-orphans", routes.recover, methods=["POST"]
            ),
            Route(daemon + "/heartbeat", routes.heartbeat, methods=["POST"]),
            Route(daemon + "/deregister", routes.deregister, methods=["POST"]),
            Route(daemon + "/tasks/claim", routes.claim, methods=["POST"]),
            Route(
                daemon + "/runtimes/{runtime_id}/tasks/{task_id}/prepare-lease",
                routes.prepare_lease,
                methods=["POST"],
            ),
            Route(task + "/start", routes.start, methods=["POST"]),
            Route(task + "/messages", routes.post_messages, methods=["POST"]),
            Route(task + "/status", routes.status, methods=["GET"]),
            Route(task + "/usage", routes.post_usage, methods=["POST"]),
            Route(task + "/session", routes.pin_session, methods=["POST"]),
            Route(task + "/complete", routes.complete, methods=["POST"]),
            Route(task + "/fail", routes.fail, methods=["POST"]),
            Route(task + "/cancel-ack", routes.cancel_ack, methods=["POST"]),
            Route(task + "/progress", routes.progress, methods=["POST"]),
            Route(task + "/gc-check", gc.task, methods=["GET"]),
            Route(
                daemon + "/workspaces/{workspace_id}/issues/gc-check", gc.issues, methods=["POST"]
            ),
            Route("/api/workspaces", user.add_workspace, methods=["POST"]),
            Route("/api/tasks", user.create_task, methods=["POST"]),
            Route("/api/tasks", user.list_tasks, methods=["GET"]),
            Route("/api/tasks/{task_id}", user.get_task, methods=["GET"]),
            Route("/api/tasks/{task_id}/messages", user.get_messages, methods=["GET"]),
            Route("/api/tasks/{task_id}/usage", user.get_usage, methods=["GET"]),
            Route("/api/tasks/{task_id}/cancel", user.cancel, methods=["POST"]),
            Route("/api/runtimes", user.runtimes, methods=["GET"]),
            WebSocketRoute(daemon + "/ws", hub.endpoint(store)),
        ],
        middleware=[Middleware(RequestGuard, token=token, listen_host=listen_host)],
        exception_handlers={
            BadRequestError: error_handler(400),
            StateError: error_handler(400),
            NotHolderError: error_handler(403),
            BodyTooLargeError: error_handler(413),
            NotFoundError: error_handler(404),
            ConflictError: error_handler(409),
            # SQLite gave up waiting for its write lock: transient, the daemon retries.
            sqlite3.OperationalError: error_handler(503, "storage busy"),
            HTTPException: http_error,
            Exception: error_handler(500, "internal server error"),
        },
    )


def _caller(request: Request) -> str:
    """The daemon a task route's request names; refused (403) when it names none."""
    caller = request.headers.get(DAEMON_ID_HEADER, "").strip()
    if not caller:
        raise NotHolderError(f"a daemon task route needs {DAEMON_ID_HEADER}")
    return caller


class _Routes:
    """One handler per endpoint; each parses, runs one store call in a thread, and answers."""

    def __init__(self, store: Store, max_body: int, hub: ControlHub) -> None:
        self._store = store
        self._max_body = max_body
        self._hub = hub

    async def _held(self, request: Request) -> str:
        """The route's task id, once the daemon naming itself is the one that claimed it.

        A daemon reports only on tasks it claimed, and says which daemon it is on every such
        request (the daemon always does): a request naming none is refused, or anyone holding
        the token could report on another daemon's task.
        """
        task = task_id(request)
        caller = _caller(request)
        holder = await in_thread(self._store.holder, task)
        if holder and holder != caller:
            raise NotHolderError("the task is held by another daemon")
        return task

    # -- the daemon protocol -------------------------------------------------------------------

    async def workspaces(self, request: Request) -> Response:
        return JSONResponse(await in_thread(self._store.workspaces))

    async def register(self, request: Request) -> Response:
        body = await parse(request, bodies.RegisterIn, self._max_body)
        runtimes = await in_thread(
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
        # Said here too, so a daemon knows before its first transcript batch that re-sending
        # one whose answer was lost is safe.
        repos = await in_thread(self._store.workspace_repos, body.workspace_id)
        answer = {"runtimes": runtimes, "daemon_id": body.daemon_id, **repos}
        return JSONResponse(answer, headers={DEDUPE_HEADER: "seq"})

    async def workspace_repos(self, request: Request) -> Response:
        # Multica's GetDaemonWorkspaceRepos: the list now, 404 for an unknown workspace.
        workspace_id = request.path_params["workspace_id"]
        return JSONResponse(await in_thread(self._store.workspace_repos, workspace_id))

    # register, recover-orphans, heartbeat: Multica's DaemonRegister, RecoverOrphanedTasks and
    # DaemonHeartbeat answer 404 for a workspace or runtime they do not know (`NotFoundError`).

    async def recover(self, request: Request) -> Response:
        await parse(request, bodies.EmptyIn, self._max_body)
        runtime_id = request.path_params["runtime_id"]
        orphaned = await in_thread(self._store.recover_orphans, runtime_id)
        if orphaned:
            log.info("recovered %d orphaned task(s) of runtime %s", orphaned, short_id(runtime_id))
        return JSONResponse({"orphaned": orphaned, "retried": 0})

    async def heartbeat(self, request: Request) -> Response:
        body = await parse(request, bodies.HeartbeatIn, self._max_body)
        await in_thread(self._store.heartbeat, body.runtime_id)
        return JSONResponse({"status": "ok"})

    async def deregister(self, request: Request) -> Response:
        body = await parse(request, bodies.DeregisterIn, self._max_body)
        count = await in_thread(self._store.deregister, body.runtime_ids)
        log.info("deregistered %d runtime(s)", count)
        return JSONResponse({"status": "ok", "deregistered": count})

    async def claim(self, request: Request) -> Response:
        # Multica's ClaimTasksByRuntime: unknown or foreign runtime ids are skipped (never a
        # 404), at most 32 tasks a claim, `max_tasks` 0 claims nothing, negative is a 400.
        body = await parse(request, bodies.ClaimIn, self._max_body)
        tasks = await in_thread(self._store.claim, body.daemon_id, body.runtime_ids, body.max_tasks)
        for t in tasks:
            shown = short_id(t["id"])
            log.info("task %s dispatched to daemon %s (%s)", shown, body.daemon_id, t["backend"])
        return JSONResponse({"tasks": tasks})

    async def start(self, request: Request) -> Response:
        # Multica's StartTask: 400 unless the task is `dispatched` (a task cancelled since the
        # claim must not run); the store raises StateError for that.
        await parse(request, bodies.EmptyIn, self._max_body)
        task = await self._held(request)
        return JSONResponse({"id": task, "status": await in_thread(self._store.start, task)})

    async def prepare_lease(self, request: Request) -> Response:
        # Multica's ExtendTaskPrepareLease: 400 unless the task is still `dispatched`; while
        # the lease holds, the claim does not hand the task out again.
        await parse(request, bodies.EmptyIn, self._max_body)
        task = await self._held(request)
        status = await in_thread(self._store.extend_lease, task)
        if status != "dispatched":
            raise StateError(f"prepare lease: the task is {status}, not dispatched")
        return JSONResponse({"id": task, "status": status})

    async def post_messages(self, request: Request) -> Response:
        # Multica's ReportTaskMessages answers `{"status": "ok"}` and stores every message it
        # gets; this server stores each (task, seq) once and says so in DEDUPE_HEADER, so a
        # daemon may re-send a batch whose answer it lost only where that header is present.
        # It also names the task's status (TASK_STATUS_HEADER): a task whose transcript flows
        # needs no status polls of its own.
        body = await parse(request, bodies.MessagesIn, self._max_body)
        task = await self._held(request)
        stored, status = await in_thread(self._store.add_messages, task, body.messages)
        headers = {DEDUPE_HEADER: "seq", TASK_STATUS_HEADER: status}
        return JSONResponse({"status": "ok", "stored": stored}, headers=headers)

    async def status(self, request: Request) -> Response:
        # Multica's GetTaskStatus: any task the caller may see, 404 for an unknown one.
        _caller(request)
        status = await in_thread(self._store.status, task_id(request))
        return JSONResponse({"id": task_id(request), "status": status})

    async def post_usage(self, request: Request) -> Response:
        body = await parse(request, bodies.UsageIn, self._max_body)
        await in_thread(self._store.record_usage, await self._held(request), body.usage)
        return JSONResponse({"status": "ok"})

    async def pin_session(self, request: Request) -> Response:
        # Multica's PinTaskSession: 400 unless the body names a session or a work dir.
        body = await parse(request, bodies.SessionIn, self._max_body)
        if not (body.session_id or body.work_dir):
            raise BadRequestError("session_id or work_dir required")
        task = await self._held(request)
        await in_thread(self._store.pin_session, task, body.session_id, body.work_dir)
        return Response(status_code=204)

    async def complete(self, request: Request) -> Response:
        # Multica's CompleteTask: 200 whatever the status; only a `running` task changes.
        body = await parse(request, bodies.CompleteIn, self._max_body)
        task = await in_thread(
            self._store.complete,
            await self._held(request),
            body.output,
            body.session_id,
            body.work_dir,
        )
        log.info("task %s reported completed (now %s)", short_id(task["id"]), task["status"])
        return JSONResponse({"id": task["id"], "status": task["status"]})

    async def fail(self, request: Request) -> Response:
        # Multica's FailTask: 200 whatever the status; a dispatched or running task fails, and
        # an empty failure_reason is classified from the error text (taskfailure.Classify).
        body = await parse(request, bodies.FailIn, self._max_body)
        task = await in_thread(
            self._store.fail,
            await self._held(request),
            body.error,
            body.failure_reason,
            body.session_id,
            body.work_dir,
        )
        log.info(
            "task %s reported failed: %s (now %s)",
            short_id(task["id"]),
            task["failure_reason"],
            task["status"],
        )
        retried = task.get("retry")
        if retried:
            log.info(
                "task %s retried as %s (attempt %d)",
                short_id(task["id"]),
                short_id(retried["id"]),
                task["attempt"] + 1,
            )
            if not retried["fire_at"]:  # a deferred retry is found by the next poll
                await self._hub.task_queued(await in_thread(self._store.task, retried["id"]))
        return JSONResponse({"id": task["id"], "status": task["status"]})

    async def progress(self, request: Request) -> Response:
        # Multica's ReportTaskProgress: the UI is told, nothing is stored; 200 for any task
        # the caller may see.
        body = await parse(request, bodies.ProgressIn, self._max_body)
        task = await self._held(request)
        log.debug("task %s: %s (%d/%d)", short_id(task), body.summary[:200], body.step, body.total)
        return JSONResponse({"status": "ok"})

    async def cancel_ack(self, request: Request) -> Response:
        await parse(request, bodies.EmptyIn, self._max_body)
        # Multica's AckTaskCancelled: 200 for any task the caller may see.
        await in_thread(self._store.cancel_ack, await self._held(request))
        return JSONResponse({"status": "ok"})
