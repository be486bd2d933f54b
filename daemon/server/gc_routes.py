"""gc-check on the reference server: what a daemon's GC asks before it removes a task's dir.

    POST /api/daemon/workspaces/{ws}/issues/gc-check  {"issue_ids": [...]}  (at most 500)
    GET  /api/daemon/tasks/{task_id}/gc-check         {"status", "completed_at"}

This server keeps no issues: each issue id is `found: false`, as Multica answers an id it does
not know (a daemon then keeps the directory until the orphan TTL). Its tasks are their own
parent records: a finished task's `completed_at` is when it ended, and the daemon removes its
directory once that is older than `MULTICA_GC_TTL`. An unknown workspace or task is a 404.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from daemon.server.bodies import IssueCheckIn
from daemon.server.requests import in_thread, parse, task_id
from daemon.server.store import NotFoundError, Store


class GcRoutes:
    """The gc-check handlers."""

    def __init__(self, store: Store, max_body: int) -> None:
        self._store = store
        self._max_body = max_body

    async def issues(self, request: Request) -> JSONResponse:
        """Every asked issue as not found: this server has none."""
        body = await parse(request, IssueCheckIn, self._max_body)
        workspace = str(request.path_params["workspace_id"])
        known = {w["id"] for w in await in_thread(self._store.workspaces)}
        if workspace not in known:
            raise NotFoundError("workspace not found")
        return JSONResponse({"issues": [{"id": i, "found": False} for i in body.issue_ids]})

    async def task(self, request: Request) -> JSONResponse:
        """The task's status and, once it ended, when."""
        task = await in_thread(self._store.task, task_id(request))
        return JSONResponse({"status": task["status"], "completed_at": task["finished_at"]})
