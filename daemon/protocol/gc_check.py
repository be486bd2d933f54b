"""What the server says of a task directory's parent record, for the GC loop (Go `client.go`).

    POST /api/daemon/workspaces/{ws}/issues/gc-check  {"issue_ids": [...]}   (at most 500)
         -> {"issues": [{"id", "found", "status", "updated_at"}]}
    GET  /api/daemon/issues/{id}/gc-check            -> {"status", "updated_at"}   (older servers)
    GET  /api/daemon/chat-sessions/{id}/gc-check     -> {"status", "updated_at"}
    GET  /api/daemon/autopilot-runs/{id}/gc-check    -> {"status", "completed_at"}
    GET  /api/daemon/tasks/{id}/gc-check             -> {"status", "completed_at"}

As Go's client: a server without the batch route (a router's bare `404 page not found`, not a
JSON 404) switches this client to the per-issue route for good; any other batch failure is
that round's, never a fan-out of single requests. A per-record 404 is `found=False` (deleted,
or not this token's to see — the server does not say which). Each call is tried once: the GC
asks again next round, and must not hold the server's attention while tasks are claimed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from daemon.errors import PermanentServerError, ServerError
from daemon.protocol.answers import Answered
from daemon.protocol.client import ServerClient
from daemon.protocol.wire import answer_json
from daemon.times import parse_utc

BATCH_SIZE = 500
"""Multica's cap on one batch (`maxIssueGCBatchSize`)."""
_ROUTER_404 = "404 page not found"


@dataclass(frozen=True, slots=True)
class ParentState:
    """One parent record as the server sees it; `found=False` when it does not know it."""

    found: bool
    status: str = ""
    updated_at: datetime | None = None


NOT_FOUND = ParentState(found=False)


class GcChecks:
    """The gc-check calls of one server, remembering whether it has the batch route."""

    def __init__(self, client: ServerClient) -> None:
        self._client = client
        self.legacy_issues = False

    async def issues(self, workspace_id: str, issue_ids: Sequence[str]) -> dict[str, ParentState]:
        """The issues' states, in batches; ServerError when a batch fails (that round only)."""
        results: dict[str, ParentState] = {}
        for start in range(0, len(issue_ids), BATCH_SIZE):
            chunk = list(issue_ids[start : start + BATCH_SIZE])
            results.update(await self._issue_batch(workspace_id, chunk))
        return results

    async def _issue_batch(self, workspace_id: str, ids: list[str]) -> dict[str, ParentState]:
        if not self.legacy_issues:
            path = f"/api/daemon/workspaces/{quote(workspace_id, safe='')}/issues/gc-check"
            try:
                return await self._client.post("gc_check", path, {"issue_ids": ids}, _parse_batch)
            except PermanentServerError as exc:
                if exc.status != 404 or exc.message.strip() != _ROUTER_404:
                    raise
                self.legacy_issues = True
        results: dict[str, ParentState] = {}
        for issue_id in ids:
            try:
                results[issue_id] = await self._one("issues", issue_id, "updated_at")
            except ServerError:
                continue  # no answer about this one: its directory stays this round
        return results

    async def chat(self, session_id: str) -> ParentState:
        """A chat session's state (404: deleted)."""
        return await self._one("chat-sessions", session_id, "updated_at")

    async def autopilot_run(self, run_id: str) -> ParentState:
        """An autopilot run's state."""
        return await self._one("autopilot-runs", run_id, "completed_at")

    async def task(self, task_id: str) -> ParentState:
        """A task's own state (quick-create tasks, and tasks with no parent record)."""
        return await self._one("tasks", task_id, "completed_at")

    async def _one(self, kind: str, record_id: str, stamp: str) -> ParentState:
        path = f"/api/daemon/{kind}/{quote(record_id, safe='')}/gc-check"
        try:
            return await self._client.get(
                "gc_check", path, lambda response: _parse_one(response, stamp)
            )
        except PermanentServerError as exc:
            if exc.status == 404:
                return NOT_FOUND
            raise


def _parse_one(response: Answered, stamp: str) -> ParentState:
    body = answer_json(response)
    if not isinstance(body, dict) or not isinstance(body.get("status"), str):
        raise ValueError("a gc-check answer is an object with a `status`")
    return ParentState(True, body["status"], parse_utc(body.get(stamp)))


def _parse_batch(response: Answered) -> dict[str, ParentState]:
    body = answer_json(response)
    items: Any = body.get("issues") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ValueError("a batch gc-check answer is an object with `issues`")
    results: dict[str, ParentState] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue  # one odd entry leaves only its own directory unanswered
        if item.get("found") is True and isinstance(item.get("status"), str):
            state = ParentState(True, item["status"], parse_utc(item.get("updated_at")))
        else:
            state = NOT_FOUND
        results[item["id"]] = state
    return results
