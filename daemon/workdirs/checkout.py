"""`POST /repo/checkout` on the health port: what `multica repo checkout <url>` calls.

The body is the one Multica's CLI sends (`url`, `workspace_id`, `workdir`, `ref`, `agent_name`,
`task_id`, `checkout_mode`, `retry_busy`) with `Authorization: Bearer <the task's token>`. The
answers and their order are Go's `repoCheckoutHandler`'s: 405, 401 (no token, or not a running
task's), 400 (bad body, bad `checkout_mode`), 403 (another workspace or task, a workdir outside
the task's once links are resolved), 400 (a URL the workspace does not have), 503 with
`Retry-After` and `X-Multica-Retryable: repo-busy` after a 10 s wait for a busy cache, else 200
`{"path", "branch_name"}`; errors are plain text, as Go's `http.Error` writes them. Who asks is
the token's task, never the body: its workspace, task, agent name and work dir decide.

Before any of that, as every state-changing route of this port: loopback peers only, no
Origin, a loopback Host. Runs on the health port's request thread; git runs in subprocesses.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon.errors import DaemonError, RepoBusyError
from daemon.ops.health_request import TEXT_CONTENT_TYPE, Reply, local_refusal
from daemon.workdirs.catalog import ActiveTask
from daemon.workdirs.git import check_ref, check_url, redact
from daemon.workdirs.service import NotConfiguredError, Workdirs
from daemon.workdirs.worktree import ISOLATED

log = logging.getLogger(__name__)

PATH = "/repo/checkout"
BUSY_WAIT = 10.0
"""Seconds a checkout that can retry (`retry_busy`) waits for a busy cache before a 503."""
PATIENT_WAIT = 240.0
"""Seconds an older client's checkout (no `retry_busy`) waits: inside the port's deadline."""
RETRY_AFTER = "2"
_TEXT_FIELDS = ("url", "workspace_id", "workdir", "ref", "agent_name", "task_id", "checkout_mode")


def _text(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(status, (message + "\n").encode(), TEXT_CONTENT_TYPE, headers)


class CheckoutRoute:
    """The route's handler, mounted on the health port."""

    def __init__(self, workdirs: Workdirs, *, busy_wait: float = BUSY_WAIT) -> None:
        self._workdirs = workdirs
        self._busy_wait = busy_wait

    def __call__(self, method: str, peer: str, headers: Mapping[str, str], body: bytes) -> Reply:
        reply, kept = self._answer(method, peer, headers, body)
        metrics = self._workdirs.metrics
        if metrics is not None:
            metrics.repo_checkouts.labels(_outcome(reply.status, kept)).inc()
        return reply

    def _answer(
        self, method: str, peer: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[Reply, bool]:
        """The reply, and whether an existing checkout was kept as it was."""
        refused = local_refusal(peer, headers)
        if refused is not None:
            return _text(403, f"repo checkout is {refused}"), False
        if method != "POST":
            return _text(405, "method not allowed"), False
        task = self._workdirs.catalog.active(_bearer(headers.get("authorization", "")))
        if task is None:
            return _text(401, "repo checkout requires an active task credential"), False
        request, problem = _parse(body)
        if problem:
            return _text(400, problem), False
        if request["workspace_id"] != task.workspace_id or request["task_id"] != task.task_id:
            return _text(403, "repo checkout task context does not match the active task"), False
        work_dir = _inside(task.work_dir, request["workdir"])
        if work_dir is None:
            return _text(403, "repo checkout workdir is not owned by the active task"), False
        return self._check_out(task, request, work_dir)

    def _check_out(
        self, task: ActiveTask, request: dict[str, Any], work_dir: Path
    ) -> tuple[Reply, bool]:
        url = request["url"]
        try:
            self._workdirs.ensure_allowed(task.workspace_id, url)
        except NotConfiguredError as exc:
            return _text(400, str(exc)), False
        except DaemonError as exc:
            log.error("repo checkout: %s: %s", redact(url), exc)
            return _text(500, str(exc)), False
        wait = self._busy_wait if request["retry_busy"] else PATIENT_WAIT
        try:
            isolated = request["checkout_mode"] == ISOLATED
            done = self._workdirs.check_out(
                task, url, request["ref"], work_dir, wait, isolated=isolated
            )
        except RepoBusyError:
            busy = (("Retry-After", RETRY_AFTER), ("X-Multica-Retryable", "repo-busy"))
            return _text(503, "repository is busy with another operation; retry later", busy), False
        except DaemonError as exc:
            log.error("repo checkout failed: %s: %s", redact(url), exc)
            return _text(500, str(exc)), False
        answer = {"path": str(done.path), "branch_name": done.branch}
        return Reply(200, json.dumps(answer).encode()), done.kept


def _outcome(status: int, kept: bool) -> str:
    if status == 200:
        return "kept" if kept else "created"
    if status == 503:
        return "busy"
    return "failed" if status >= 500 else "refused"


def _bearer(header: str) -> str:
    header = header.strip()
    return header[len("Bearer ") :].strip() if header.startswith("Bearer ") else ""


def _parse(body: bytes) -> tuple[dict[str, Any], str]:
    """The request's fields, or what is wrong with it (Go's 400 texts where it has them)."""
    try:
        raw = json.loads(body)
    except ValueError as exc:
        return {}, f"invalid request body: {exc}"
    if not isinstance(raw, dict):
        return {}, "invalid request body: not a JSON object"
    for name in _TEXT_FIELDS:
        if not isinstance(raw.get(name, ""), str):
            return {}, f"invalid request body: {name} must be a string"
    if not isinstance(raw.get("retry_busy", False), bool):
        return {}, "invalid request body: retry_busy must be a boolean"
    request: dict[str, Any] = {name: raw.get(name, "") for name in _TEXT_FIELDS}
    request["url"] = request["url"].strip()
    request["ref"] = request["ref"].strip()
    request["retry_busy"] = raw.get("retry_busy", False)
    for name in ("url", "workspace_id", "workdir"):
        if not request[name]:
            return {}, f"{name} is required"
    if request["checkout_mode"] not in ("", ISOLATED):
        return {}, "invalid checkout_mode"
    problem = check_url(request["url"]) or check_ref(request["ref"])
    return request, problem or ""


def _inside(root: Path, requested: str) -> Path | None:
    """`requested` with links resolved, when it is the task's work dir or inside it."""
    try:
        real_root = root.resolve(strict=True)
        real = Path(requested).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not Path(requested).is_absolute() or not real.is_dir():
        return None
    return real if real == real_root or real.is_relative_to(real_root) else None
