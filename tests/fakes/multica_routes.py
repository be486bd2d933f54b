"""The rows and route handlers of the Multica-faithful test server, one handler per Go handler."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from daemon.protocol.failure_text import classify, resume_unsafe
from tests.fakes import multica_local

if TYPE_CHECKING:
    from tests.fakes.multica_server import MulticaFake

CLAIM_CAP = 32
IMPORT_BATCH = 10
"""Go's `maxLocalSkillImportBatch`: imports one heartbeat hands a batch-capable daemon."""
TASK_TOKEN_PREFIX = "mat_"
# `retryAttemptCeiling` and `retryDelayForAttempt` of Go's task service: a provider network
# failure gets three attempts, the last one deferred; a task a restarted daemon left in flight
# (`runtime_recovery`) gets the default two, at once.
RETRY_CEILING = {"agent_error.provider_network": 3, "runtime_recovery": 2}
DEFERRED_LAST = {"agent_error.provider_network"}
FINAL_RETRY_WAIT = 5.0
RECOVERY_ERROR = "daemon restarted while task was in flight"
WAITING = "waiting_local_directory"


def error(status: int, message: str) -> JSONResponse:
    """Multica's error shape."""
    return JSONResponse({"error": message}, status_code=status)


def _is_uuid(value: Any) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


@dataclass
class FakeRuntime:
    """One registered runtime: a backend of one daemon in one workspace."""

    id: str
    workspace_id: str
    daemon_id: str
    provider: str
    name: str
    status: str = "online"
    deleted: bool = False
    cli_version: str = ""
    """The daemon's `cli_version` at its last register (kept in the row's metadata)."""
    version: str = ""
    """The agent CLI's version as the daemon reported it."""
    device_info: str = ""
    """Go's `device_name · version`, what the runtime's page shows as its device."""
    queued: dict[str, Any] = field(default_factory=dict)
    """One-shot `pending_*` requests the next heartbeat hands out (Multica's `PopPending`)."""
    profile_id: str = ""
    """The custom runtime profile it is an instance of ("": a built-in runtime)."""
    failure_reason: str = ""
    """Why the daemon could not run its profile (`failed_profiles`; "": it runs)."""
    offline_reason: dict[str, Any] | None = None
    """What the deregister that took it offline said of why (`offline_reasons`)."""


@dataclass
class FakeTask:
    """One task on the server: its claim fields, its state and what the daemon reported."""

    id: str
    workspace_id: str
    provider: str
    fields: dict[str, Any]
    agent: dict[str, Any]
    status: str = "queued"
    runtime_id: str = ""
    auth_token: str = ""
    output: str = ""
    error: str = ""
    failure_reason: str = ""
    session_id: str = ""
    work_dir: str = ""
    cancel_acks: int = 0
    attempt: int = 1
    parent_id: str = ""
    fire_at: float = 0.0
    """Monotonic time before which a deferred retry is not claimed (0: at once)."""
    ended: int = 0
    """Order in which tasks reached a terminal status (0: not yet)."""
    claimed: dict[str, Any] | None = None
    """The task as the claim handed it to a daemon."""
    deliveries: int = 0
    """How many claims handed the task out (more than one: a claim's answer was taken as lost)."""
    handed: list[str] = field(default_factory=list)
    """How each claim that handed the task out came: `http` or `socket`."""
    dispatched_at: float = 0.0
    lease_until: float = 0.0
    """Monotonic time until which the task, dispatched and not started, is not handed out
    again (its prepare lease)."""
    started: bool = False
    target_runtime: str = ""
    """The runtime its agent is bound to ("": any of its provider in its workspace)."""
    retired_session_id: str = ""
    rollout_missing: bool = False
    branch_name: str = ""
    durable_work_dir: str = ""
    wait_reason: str = ""
    waits: list[str] = field(default_factory=list)
    """Every reason a daemon gave for waiting for the task's local directory."""
    cancel_ack_body: dict[str, Any] = field(default_factory=dict)
    daemon_token: str = ""
    """The task-scoped daemon token minted with remote MCP connections (Go's
    `remoteMCPDaemonTokenForClaim`)."""

    def claim_body(self) -> dict[str, Any]:
        """The task as Multica's claim returns it: no `prompt`, a task-scoped token."""
        return {
            "id": self.id,
            "agent_id": self.agent["id"],
            "runtime_id": self.runtime_id,
            "workspace_id": self.workspace_id,
            "status": self.status,
            "agent": self.agent,
            "auth_token": self.auth_token,
            **({"remote_mcp_daemon_token": self.daemon_token} if self.daemon_token else {}),
            **self.fields,
        }

    def body(self) -> dict[str, Any]:
        """The task row as the terminal routes answer it."""
        return {
            "id": self.id,
            "status": self.status,
            "agent_id": self.agent["id"],
            "runtime_id": self.runtime_id,
            "workspace_id": self.workspace_id,
            "output": self.output,
            "error": self.error,
            "failure_reason": self.failure_reason,
            "session_id": self.session_id,
            "work_dir": self.work_dir,
        }


@dataclass(frozen=True)
class SeenRequest:
    """One request the server read: route name, path and JSON body (None for a GET), and the
    monotonic time it was read."""

    route: str
    path: str
    body: Any
    at: float = field(default_factory=time.monotonic, compare=False)


def _row(found: FakeRuntime) -> dict[str, Any]:
    """`AgentRuntimeResponse`, the fields a daemon reads."""
    return {
        "id": found.id,
        "name": found.name,
        "provider": found.provider,
        "status": found.status,
        "profile_id": found.profile_id or None,
    }


def route_of(path: str) -> str:
    """The route name a control refers to: the path's last part (`heartbeat`, `complete`, …)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


class Handlers:
    """`DaemonRegister`, `DaemonHeartbeat`, `ClaimTasksByRuntime`, `StartTask`, … of Go."""

    def __init__(self, fake: MulticaFake) -> None:
        self.fake = fake

    async def _read(self, request: Request) -> tuple[Any, JSONResponse | None]:
        """The JSON body (recorded with the request), or a 400 as Go's decoder gives it."""
        raw = await request.body() if request.method == "POST" else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        self.fake.requests.append(SeenRequest(route_of(request.url.path), request.url.path, body))
        if self.fake.token and request.headers.get("authorization") != f"Bearer {self.fake.token}":
            return body, error(401, "invalid token")
        if request.method == "POST" and not isinstance(body, dict):
            return body, error(400, "invalid request body")
        return body, None

    async def _task(self, request: Request) -> tuple[Any, FakeTask | None, JSONResponse | None]:
        body, refused = await self._read(request)
        if refused is not None:
            return body, None, refused
        task = self.fake.tasks.get(request.path_params["tid"])
        if task is None:
            return body, None, error(404, "task not found")
        return body, task, None

    async def workspaces(self, request: Request) -> JSONResponse:
        _, refused = await self._read(request)
        return refused or JSONResponse(
            [{"id": k, "name": v} for k, v in self.fake.workspaces.items()]
        )

    async def register(self, request: Request) -> JSONResponse:
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        if not body.get("daemon_id"):
            return error(400, "daemon_id is required")
        workspace_id = body.get("workspace_id") or ""
        if not workspace_id:
            return error(400, "workspace_id is required")
        if not body.get("runtimes") and not body.get("failed_profiles"):
            return error(400, "at least one runtime or failed profile is required")
        if workspace_id not in self.fake.workspaces or workspace_id in self.fake.refused_registers:
            return error(404, "workspace not found")
        refused = self._check_profiles(workspace_id, body)
        if refused is not None:
            return refused
        out = [self._upsert(workspace_id, body, r) for r in body.get("runtimes") or []]
        legacy = body.get("legacy_daemon_ids") or []
        for row in out:
            if not row["profile_id"]:  # profile rows have no hostname-keyed ancestor
                self._merge_legacy(self.fake.runtimes[row["id"]], legacy)
        for failed in body.get("failed_profiles") or []:
            self._profile_row(workspace_id, body, failed, failed=True)
        settings = self.fake.settings.get(workspace_id) or {}
        return JSONResponse({"runtimes": out, **self._repos(workspace_id), "settings": settings})

    def _repos(self, workspace_id: str) -> dict[str, Any]:
        """Go's `workspaceReposResponse`: the list, and a version hashed from its sorted URLs."""
        repos = self.fake.repos.get(workspace_id, [])
        urls = "\n".join(sorted(r["url"] for r in repos))
        version = hashlib.sha256(urls.encode()).hexdigest()
        return {"repos": repos, "repos_version": version}

    async def workspace_repos(self, request: Request) -> JSONResponse:
        """`GetDaemonWorkspaceRepos`: the workspace's current repository list."""
        _, refused = await self._read(request)
        if refused is not None:
            return refused
        workspace_id = request.path_params["wid"]
        if workspace_id not in self.fake.workspaces:
            return error(404, "workspace not found")
        # Go's answer leaves `settings` out when the workspace has none.
        settings = self.fake.settings.get(workspace_id)
        extra = {"settings": settings} if settings else {}
        return JSONResponse({"workspace_id": workspace_id, **self._repos(workspace_id), **extra})

    def _upsert(
        self, workspace_id: str, body: dict[str, Any], runtime: dict[str, Any]
    ) -> dict[str, Any]:
        # One row per (workspace, daemon, provider): a restart gets its runtime back; a deleted
        # runtime's row is gone, so registering again makes a new one.
        if (runtime.get("profile_id") or "").strip():
            row = self._profile_row(workspace_id, body, runtime, failed=False)
            assert row is not None  # `_check_profiles` refused the register otherwise
            return _row(row)
        daemon_id, provider = body["daemon_id"], runtime.get("type") or ""
        for found in self.fake.live_runtimes(workspace_id):
            if (found.daemon_id, found.provider, found.profile_id) == (daemon_id, provider, ""):
                found.status = "online"
                break
        else:
            found = FakeRuntime(
                str(uuid.uuid4()), workspace_id, daemon_id, provider, runtime.get("name") or ""
            )
            self.fake.runtimes[found.id] = found
        found.name = runtime.get("name") or found.name
        found.cli_version = body.get("cli_version") or ""
        found.version = runtime.get("version") or ""
        device = (body.get("device_name") or "").strip()
        found.device_info = " · ".join(p for p in (device, found.version) if p)
        return _row(found)

    def _check_profiles(self, workspace_id: str, body: dict[str, Any]) -> JSONResponse | None:
        """The register's refusal for a profile entry it cannot take (Go checks each in turn:
        tests/fakes/multica_profiles.py)."""
        for entry in body.get("runtimes") or []:
            profile_id = (entry.get("profile_id") or "").strip()
            if not profile_id:
                continue
            profile = self.fake.profiles.get(profile_id)
            if profile is None or profile.workspace_id != workspace_id:
                return error(400, f"unknown runtime profile: {profile_id}")
            if not profile.enabled:
                return error(409, f"runtime profile is disabled: {profile_id}")
        return None

    def _profile_row(
        self, workspace_id: str, body: dict[str, Any], entry: dict[str, Any], *, failed: bool
    ) -> FakeRuntime | None:
        """`UpsertAgentRuntimeWithProfile`: the profile's row for this daemon, online or (a
        failed profile) offline with its reason; None for a failed entry of a profile that is
        unknown or disabled."""
        profile = self.fake.profiles.get((entry.get("profile_id") or "").strip())
        if profile is None or profile.workspace_id != workspace_id or not profile.enabled:
            return None
        daemon_id = body["daemon_id"]
        device = (body.get("device_name") or "").strip()
        for found in self.fake.live_runtimes(workspace_id):
            if (found.daemon_id, found.profile_id) == (daemon_id, profile.id):
                break
        else:
            found = FakeRuntime(
                str(uuid.uuid4()), workspace_id, daemon_id, profile.protocol_family, ""
            )
            found.profile_id = profile.id
            self.fake.runtimes[found.id] = found
        found.provider = profile.protocol_family
        found.cli_version = body.get("cli_version") or ""
        if failed:
            found.name = f"{profile.display_name} ({device})" if device else profile.display_name
            found.status, found.version = "offline", ""
            reason = (entry.get("reason") or "").strip()
            found.failure_reason = reason or "custom runtime command could not be resolved"
            found.device_info = device
        else:
            found.name = entry.get("name") or found.name
            found.status, found.version = "online", entry.get("version") or ""
            found.failure_reason = ""
            found.device_info = " · ".join(p for p in (device, found.version) if p)
        return found

    def _merge_legacy(self, registered: FakeRuntime, legacy_ids: list[Any]) -> None:
        """Go's `mergeLegacyRuntimes`: a runtime of the same workspace and provider registered
        under a daemon id this machine had before (matched without case) gives its tasks to
        the new runtime, and its row is deleted."""
        wanted = {str(i).strip().lower() for i in legacy_ids if str(i).strip()}
        for old in self.fake.live_runtimes(registered.workspace_id):
            if old.id == registered.id or old.provider != registered.provider or old.profile_id:
                continue
            if old.daemon_id.lower() not in wanted:
                continue
            for task in self.fake.tasks.values():
                if task.runtime_id == old.id:
                    task.runtime_id = registered.id
            old.deleted = True
            self.fake.merged_runtimes[old.id] = registered.id

    async def deregister(self, request: Request) -> JSONResponse:
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        if not body.get("runtime_ids"):
            return error(400, "runtime_ids is required")
        reasons = body.get("offline_reasons") or {}
        for runtime_id in body["runtime_ids"]:
            if runtime_id in self.fake.runtimes:
                self.fake.runtimes[runtime_id].status = "offline"
                # `setRuntimeOffline`: the reason goes in the row's metadata when one is given.
                self.fake.runtimes[runtime_id].offline_reason = reasons.get(runtime_id)
        return JSONResponse({"status": "ok"})

    async def heartbeat(self, request: Request) -> JSONResponse:
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        runtime_id = body.get("runtime_id") or ""
        if not runtime_id:
            return error(400, "runtime_id is required")
        if not _is_uuid(runtime_id):
            return error(400, "invalid runtime_id")
        runtime = self.fake.runtimes.get(runtime_id)
        if runtime is None or runtime.deleted:
            return error(404, "runtime not found")
        batched = body.get("supports_batch_import") is True
        return JSONResponse(self.fake.heartbeat_answer(runtime, batched))

    async def claim(self, request: Request) -> JSONResponse:
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        capabilities = request.headers.get("x-client-capabilities", "")
        status, answer = self.claim_tasks(body, capabilities, "http")
        return JSONResponse(answer, status_code=status)

    def claim_tasks(
        self, body: dict[str, Any], capabilities: str, via: str
    ) -> tuple[int, dict[str, Any]]:
        """`ClaimTasksByRuntime` on a decoded body, over HTTP or the control WebSocket (`via`:
        `http` or `socket`, noted on each task handed out)."""
        daemon_id = body.get("daemon_id") or ""
        if not daemon_id:
            return 400, {"error": "daemon_id is required"}
        wanted = int(body.get("max_tasks") or 0)
        if wanted < 0:
            return 400, {"error": "max_tasks must not be negative"}
        ours = {
            r.id: r
            for r in self.fake.live_runtimes()
            if r.id in set(body.get("runtime_ids") or []) and r.daemon_id == daemon_id
        }
        limit = min(wanted, CLAIM_CAP)
        claimed: list[dict[str, Any]] = [
            task.claimed for task in self._stale(ours, limit, via) if task.claimed
        ]
        if self.fake.repeat_claims:
            # Hostile: what this daemon already runs, handed out once more.
            again = [t for t in self.fake.tasks.values() if t.status in ("dispatched", "running")]
            claimed.extend(t.claim_body() for t in again if t.runtime_id in ours)
        now = time.monotonic()
        for task in self.fake.tasks.values():
            if len(claimed) >= limit:
                break
            runtime = self._runtime_for(task, ours)
            due = task.fire_at <= now
            if task.status == "queued" and runtime is not None and due:
                task.status, task.runtime_id = "dispatched", runtime
                if reason := multica_local.blocked(task.fields, daemon_id, capabilities):
                    # Cancelled with its reason, and left out of this claim's answer.
                    self._end(task, "cancelled")
                    task.error, task.failure_reason = reason, "local_directory_error"
                    continue
                self._deliver(task, via)
                task.auth_token = TASK_TOKEN_PREFIX + secrets.token_hex(16)
                if task.fields.get("remote_mcp_connections"):
                    task.daemon_token = "mdt_" + secrets.token_hex(16)
                # A project's repositories come with the task; else the workspace's own.
                workspace = self._repos(task.workspace_id)["repos"]
                fields = {"repos": workspace, **self._resume_fields(task), **task.claim_body()}
                task.claimed = self.fake.shape_claim(fields, capabilities)
                claimed.append(task.claimed)
                if self.fake.repeat_claims:
                    claimed.append(task.claimed)
                if task.id in self.fake.cancelled_on_claim:
                    task.status = "cancelled"
        return 200, {"tasks": claimed}

    def _deliver(self, task: FakeTask, via: str) -> None:
        now = time.monotonic()
        task.deliveries += 1
        task.handed.append(via)
        task.dispatched_at, task.lease_until = now, now + self.fake.prepare_lease

    def _stale(self, ours: dict[str, Any], limit: int, via: str) -> list[FakeTask]:
        """`ReclaimStaleDispatchedTasksForRuntimes`: tasks dispatched to these runtimes and not
        started, past the window in which a claim's answer is still on its way, whose prepare
        lease ran out; each is handed out again (first) with a fresh lease."""
        now = time.monotonic()
        stale = [
            t
            for t in self.fake.tasks.values()
            if t.status == "dispatched"
            and not t.started
            and t.runtime_id in ours
            and now - t.dispatched_at >= self.fake.claim_recovery
            and t.lease_until < now
        ][:limit]
        for task in stale:
            self._deliver(task, via)
        return stale

    async def prepare_lease(self, request: Request) -> JSONResponse:
        """`ExtendTaskPrepareLease`: a dispatched task not yet started, on this runtime, keeps
        its claim for another lease; anything else is a 400 (the update found no row)."""
        _, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        if task.runtime_id != request.path_params["rid"]:
            return error(404, "task not found")
        if task.status not in ("dispatched", WAITING) or task.started:
            return error(400, "no rows in result set")
        task.lease_until = time.monotonic() + self.fake.prepare_lease
        return JSONResponse(task.body())

    def _resume_fields(self, task: FakeTask) -> dict[str, Any]:
        """What the claim tells an issue task to resume (Go's `GetLastTaskSession`): the most
        recent session of the same agent on the same issue whose latest terminal run did not
        poison it and that no run retired; the session only on the same runtime, the work dir
        always."""
        issue = task.fields.get("issue_id")
        if not issue or "prior_session_id" in task.fields:
            return {}
        ended = sorted(
            (
                t
                for t in self.fake.tasks.values()
                if t.ended
                and t.agent["id"] == task.agent["id"]
                and t.fields.get("issue_id") == issue
            ),
            key=lambda t: t.ended,
        )
        fields: dict[str, Any] = {}
        # `GetLatestTaskRolloutMissing`: the last run withheld its Codex session, so whatever
        # is resumed below is older, and the run must say the last turn was not carried over.
        finished = [t for t in ended if t.status in ("completed", "failed") and t.started]
        if finished and finished[-1].rollout_missing:
            fields["prior_session_resume_unavailable"] = True
        retired = {t.retired_session_id for t in ended if t.retired_session_id}
        latest = {t.session_id: t for t in ended if t.session_id}  # each session's last run
        usable = [
            t
            for t in latest.values()
            if t.session_id not in retired
            and (t.status != "failed" or not resume_unsafe(t.failure_reason, t.error))
        ]
        if not usable:
            return fields
        prior = max(usable, key=lambda t: t.ended)
        fields["prior_work_dir"] = prior.work_dir
        if prior.runtime_id == task.runtime_id:
            fields["prior_session_id"] = prior.session_id
        return fields

    def _retry(self, task: FakeTask) -> bool:
        """Go's auto-retry of a failed task (`retryEligible`, `CreateRetryTask`): the child
        inherits the task's fields; what it resumes, its claim finds (`_resume_fields`) in the
        session and work dir the parent's row holds — reported, or pinned while it ran."""
        ceiling = RETRY_CEILING.get(task.failure_reason, 0)
        if task.attempt >= ceiling or not task.fields.get("issue_id"):
            return False
        child = FakeTask(
            str(uuid.uuid4()),
            task.workspace_id,
            task.provider,
            dict(task.fields),
            task.agent,
            attempt=task.attempt + 1,
            parent_id=task.id,
        )
        if child.attempt >= ceiling and task.failure_reason in DEFERRED_LAST:
            child.fire_at = time.monotonic() + FINAL_RETRY_WAIT
        self.fake.tasks[child.id] = child
        return True

    def _end(self, task: FakeTask, status: str) -> None:
        task.status = status
        task.ended = 1 + max(t.ended for t in self.fake.tasks.values())

    @staticmethod
    def _runtime_for(task: FakeTask, ours: dict[str, Any]) -> str | None:
        if task.target_runtime:
            return task.target_runtime if task.target_runtime in ours else None
        for runtime in ours.values():
            if runtime.profile_id:
                continue  # a profile's runtime runs the agents bound to it
            if (runtime.workspace_id, runtime.provider) == (task.workspace_id, task.provider):
                return str(runtime.id)
        return None

    async def recover(self, request: Request) -> JSONResponse:
        _, refused = await self._read(request)
        if refused is not None:
            return refused
        runtime = self.fake.runtimes.get(request.path_params["rid"])
        if runtime is None or runtime.deleted:
            return error(404, "runtime not found")
        orphaned = [
            t
            for t in self.fake.tasks.values()
            if t.runtime_id == runtime.id and t.status in ("dispatched", "running", WAITING)
        ]
        # `RecoverOrphanedTasksForRuntime`, then the shared post-failure pipeline's retry.
        retried = 0
        for task in orphaned:
            self._end(task, "failed")
            task.failure_reason, task.error = "runtime_recovery", RECOVERY_ERROR
            retried += self._retry(task)
        return JSONResponse({"orphaned": len(orphaned), "retried": retried})

    async def pin_session(self, request: Request) -> Response:
        """`PinTaskSession`: 204; the row takes what is given (`UpdateAgentTaskSession`) while
        the task is dispatched or running, or cancelled with no session yet."""
        body, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        if not isinstance(body, dict):
            return error(400, "invalid request body")
        session_id, work_dir = body.get("session_id") or "", body.get("work_dir") or ""
        if not (session_id or work_dir):
            return error(400, "session_id or work_dir required")
        fills_empty = task.status == "cancelled" and not task.session_id
        if task.status in ("dispatched", "running") or fills_empty:
            task.session_id = session_id or task.session_id
            task.work_dir = work_dir or task.work_dir
        return Response(status_code=204)

    async def wait_local_directory(self, request: Request) -> JSONResponse:
        """`MarkTaskWaitingLocalDirectory`: a dispatched task waits, with its reason."""
        body, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        if task.status != "dispatched":
            return error(400, "mark task waiting_local_directory: no rows in result set")
        task.status, task.wait_reason = WAITING, str(body.get("reason") or "")
        task.waits.append(task.wait_reason)
        return JSONResponse(task.body())

    async def status(self, request: Request) -> JSONResponse:
        _, task, refused = await self._task(request)
        return refused or JSONResponse({"status": task.status if task else ""})

    async def start(self, request: Request) -> JSONResponse:
        _, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        if task.status not in ("dispatched", WAITING):
            return error(400, "start task: no rows in result set")
        task.status, task.started = "running", True
        return JSONResponse(task.body())

    async def complete(self, request: Request) -> JSONResponse:
        body, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        if task.status == "running":
            self._end(task, "completed")
            task.output = body.get("output") or ""
            task.session_id = body.get("session_id") or ""
            task.work_dir = body.get("work_dir") or ""
            self._bookkeeping(task, body)
        return JSONResponse(task.body())

    @staticmethod
    def _bookkeeping(task: FakeTask, body: dict[str, Any]) -> None:
        """`CompleteAgentTask` / `FailAgentTask`: a withheld session clears the row's; the
        retired session, branch and durable work dir are kept once given."""
        task.rollout_missing = body.get("session_rollout_missing") is True
        if task.rollout_missing:
            task.session_id = ""
        task.retired_session_id = body.get("retired_session_id") or task.retired_session_id
        task.branch_name = body.get("branch_name") or task.branch_name
        task.durable_work_dir = body.get("durable_work_dir") or task.durable_work_dir

    async def fail(self, request: Request) -> JSONResponse:
        body, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        if task.status in ("dispatched", "running", WAITING):
            self._end(task, "failed")
            task.error = body.get("error") or ""
            task.failure_reason = body.get("failure_reason") or classify(task.error)
            task.session_id = body.get("session_id") or task.session_id
            task.work_dir = body.get("work_dir") or task.work_dir
            self._bookkeeping(task, body)
            self._retry(task)
        return JSONResponse(task.body())

    async def add_messages(self, request: Request) -> JSONResponse:
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        batch = body.get("messages") or []
        if not batch:
            return JSONResponse({"status": "ok"})
        task_id = request.path_params["tid"]
        if task_id not in self.fake.tasks:
            return error(404, "task not found")
        # The real messages table has no unique (task, seq): a re-sent batch is stored again.
        self.fake.messages.extend({"task_id": task_id, **m} for m in batch)
        return JSONResponse({"status": "ok"})

    async def list_messages(self, request: Request) -> JSONResponse:
        _, task, refused = await self._task(request)
        return refused or JSONResponse(self.fake.messages_of(task.id if task else ""))

    async def add_usage(self, request: Request) -> JSONResponse:
        body, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        for entry in body.get("usage") or []:
            key = (task.id, entry.get("provider") or task.provider, entry.get("model") or "")
            self.fake.usage[key] = entry
        return JSONResponse({"status": "ok"})

    async def progress(self, request: Request) -> JSONResponse:
        """`ReportTaskProgress`: `{summary, step, total}` for a task the daemon may see."""
        body, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        self.fake.progress.append({"task_id": task.id, **body})
        return JSONResponse({"status": "ok"})

    async def cancel_ack(self, request: Request) -> JSONResponse:
        body, task, refused = await self._task(request)
        if refused is not None or task is None:
            return refused or error(404, "task not found")
        task.cancel_acks += 1
        task.cancel_ack_body = dict(body or {})
        if task.status == "cancelled":  # only a cancelled row takes the payload (status CAS)
            task.branch_name = body.get("branch_name") or task.branch_name
            task.durable_work_dir = body.get("durable_work_dir") or task.durable_work_dir
        return JSONResponse({"status": "ok"})

    async def action_result(self, request: Request) -> JSONResponse:
        """The result of a pending `update`, `models`, `local-skills` or `local-skills/import`."""
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        kind = request.path_params["kind"]
        if kind not in ("update", "models", "local-skills", "local-skills/import"):
            return error(404, "not found")
        runtime = self.fake.runtimes.get(request.path_params["rid"])
        if runtime is None or runtime.deleted:
            return error(404, "runtime not found")
        params = request.path_params
        fake = self.fake
        fake.actions_in_flight += 1
        fake.most_actions_in_flight = max(fake.most_actions_in_flight, fake.actions_in_flight)
        try:
            await anyio.sleep(fake.action_delay)
        finally:
            fake.actions_in_flight -= 1
        self.fake.action_results.append(
            {"kind": kind, "runtime_id": runtime.id, "request_id": params["request_id"], **body}
        )
        return JSONResponse({"status": "ok"})

    async def renew(self, request: Request) -> JSONResponse:
        _, refused = await self._read(request)
        return refused or JSONResponse({"expires_at": "", "renewed": False})
