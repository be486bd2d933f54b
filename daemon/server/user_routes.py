"""The reference server's own extensions for users: workspaces, tasks, transcripts, runtimes.

Queuing and cancelling a task also tell the control hub, so a daemon hears of it at once
instead of at its next poll.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from daemon.logs import short_id
from daemon.server import bodies
from daemon.server.control import ControlHub
from daemon.server.requests import BadRequestError, in_thread, int_param, parse, task_id
from daemon.server.store import MAX_PAGE, Store

log = logging.getLogger(__name__)

STATUSES = ("queued", "dispatched", "running", "completed", "failed", "cancelled")
DEFAULT_PAGE = 100
"""Tasks in one `GET /api/tasks` page when `limit` is not given."""


class UserRoutes:
    """One handler per user endpoint; each parses, runs one store call in a thread, answers."""

    def __init__(self, store: Store, max_body: int, hub: ControlHub) -> None:
        self._store = store
        self._max_body = max_body
        self._hub = hub

    async def add_workspace(self, request: Request) -> Response:
        body = await parse(request, bodies.WorkspaceIn, self._max_body)
        workspace = await in_thread(self._store.add_workspace, body.name, body.id)
        log.info("workspace %s added", workspace["id"])
        return JSONResponse(workspace, status_code=201)

    async def create_task(self, request: Request) -> Response:
        body = await parse(request, bodies.TaskIn, self._max_body)
        task = await in_thread(
            self._store.create_task,
            body.prompt,
            backend=body.backend,
            workspace_id=body.workspace_id,
            agent=body.agent,
            prior_session_id=body.prior_session_id,
            only_served=True,
            repos=body.repos,
            rerun_of=body.rerun_of,
        )
        log.info("task %s queued (%s)", short_id(task["id"]), task["backend"] or "any backend")
        await self._hub.task_queued(task)
        return JSONResponse(task, status_code=201)

    async def list_tasks(self, request: Request) -> Response:
        status = request.query_params.get("status")
        if status is not None and status not in STATUSES:
            raise BadRequestError(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
        limit = int_param(request, "limit", DEFAULT_PAGE, low=1, high=MAX_PAGE)
        after = request.query_params.get("after")
        page = await in_thread(self._store.tasks, status, limit, after)
        # A full page may have a successor: the last id is where the next page starts.
        more = {"X-Next-After": page[-1]["id"]} if len(page) == limit else {}
        return JSONResponse(page, headers=more)

    async def get_task(self, request: Request) -> Response:
        return JSONResponse(await in_thread(self._store.task, task_id(request)))

    async def get_messages(self, request: Request) -> Response:
        after = int_param(request, "after_seq", None)
        return JSONResponse(await in_thread(self._store.messages, task_id(request), after))

    async def get_usage(self, request: Request) -> Response:
        return JSONResponse(await in_thread(self._store.usage, task_id(request)))

    async def cancel(self, request: Request) -> Response:
        task = await in_thread(self._store.cancel, task_id(request))
        log.info("task %s cancel requested (now %s)", short_id(task["id"]), task["status"])
        self._hub.task_cancelled(task["id"])
        return JSONResponse(task)

    async def runtimes(self, request: Request) -> Response:
        return JSONResponse(await in_thread(self._store.runtimes))
