"""The gc-check routes of the Multica-faithful server (Go `handler/daemon.go`).

    POST /api/daemon/workspaces/{ws}/issues/gc-check   {"issue_ids": [...]}, at most 500 UUIDs
    GET  /api/daemon/issues/{id}/gc-check               404 `issue not found`
    GET  /api/daemon/chat-sessions/{id}/gc-check        404 once the session is deleted
    GET  /api/daemon/autopilot-runs/{id}/gc-check
    GET  /api/daemon/tasks/{id}/gc-check

Issue ids outside the workspace, or unknown, are `found: false` (no enumeration oracle); a
workspace the token cannot see is a JSON 404. `fake.batch_gc_unsupported` makes the batch
route answer as an older server's router does (`404 page not found`, plain text).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from tests.fakes.multica_routes import SeenRequest, error, route_of

if TYPE_CHECKING:
    from tests.fakes.multica_server import MulticaFake

MAX_BATCH = 500


@dataclass
class Record:
    """An issue, chat session or autopilot run: its workspace, status and last change."""

    workspace_id: str
    status: str
    updated_at: datetime

    def stamp(self) -> str:
        return self.updated_at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _is_uuid(value: object) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


class GcHandlers:
    """`BatchIssueGCCheck`, `GetIssueGCCheck`, `GetChatSessionGCCheck`, ... of Go."""

    def __init__(self, fake: MulticaFake) -> None:
        self.fake = fake

    async def _authorised(self, request: Request) -> Response | None:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        path = request.url.path
        self.fake.requests.append(SeenRequest(route_of(path), path, body))
        if self.fake.token and request.headers.get("authorization") != f"Bearer {self.fake.token}":
            return error(401, "invalid token")
        return None

    async def issues(self, request: Request) -> Response:
        refused = await self._authorised(request)
        if refused is not None:
            return refused
        if self.fake.batch_gc_unsupported:
            return PlainTextResponse("404 page not found\n", status_code=404)
        workspace_id = request.path_params["ws"]
        if workspace_id not in self.fake.workspaces:
            return error(404, "workspace not found")
        try:
            body = await request.json()
        except ValueError:
            return error(400, "invalid request body")
        ids = body.get("issue_ids") if isinstance(body, dict) else None
        if not isinstance(ids, list):
            return error(400, "invalid request body")
        if len(ids) > MAX_BATCH:
            return error(400, "too many issue_ids")
        if not all(_is_uuid(i) for i in ids):
            return error(400, "invalid issue_id")
        items = []
        for issue_id in ids:
            record = self.fake.issues.get(issue_id)
            if record is None or record.workspace_id != workspace_id:
                items.append({"id": issue_id, "found": False})
            else:
                items.append(
                    {
                        "id": issue_id,
                        "found": True,
                        "status": record.status,
                        "updated_at": record.stamp(),
                    }
                )
        return JSONResponse({"issues": items})

    async def issue(self, request: Request) -> Response:
        return await self._one(request, self.fake.issues, "issue not found", "updated_at")

    async def chat(self, request: Request) -> Response:
        return await self._one(request, self.fake.chats, "chat session not found", "updated_at")

    async def autopilot_run(self, request: Request) -> Response:
        runs = self.fake.autopilot_runs
        return await self._one(request, runs, "autopilot run not found", "completed_at")

    async def task(self, request: Request) -> Response:
        refused = await self._authorised(request)
        if refused is not None:
            return refused
        task = self.fake.tasks.get(request.path_params["id"])
        if task is None:
            return error(404, "task not found")
        return JSONResponse({"status": task.status, "completed_at": None})

    async def _one(
        self, request: Request, records: dict[str, Record], missing: str, stamp: str
    ) -> Response:
        refused = await self._authorised(request)
        if refused is not None:
            return refused
        record = records.get(request.path_params["id"])
        if record is None or record.workspace_id not in self.fake.workspaces:
            return error(404, missing)
        return JSONResponse({"status": record.status, stamp: record.stamp()})
