"""A test server that answers the daemon routes the way the real Multica server does.

Built from the Go handlers (`server/internal/handler/daemon.go`, `task_lifecycle.go`) and their
queries (`server/pkg/db/queries/agent.sql`), unlike the embedded reference server, which is
lenient where Multica refuses:

- a claim carries no `prompt`, only what the task is about (`issue_id`, comment, chat,
  autopilot or quick-create fields) and a task token with the `mat_` prefix; runtime ids that
  are not UUIDs, unknown, deleted or another daemon's are skipped, never a 404; at most 32
  tasks a claim, none for `max_tasks: 0`, 400 for a negative one;
- `start` moves only a `dispatched` task to `running`, anything else is a 400;
- `complete` changes only a `running` task, `fail` a `dispatched` or `running` one; on any
  other task both answer 200 and change nothing; an empty `failure_reason` is classified
  (`taskfailure.Classify`); a failed `agent_error.provider_network` issue task is retried
  (three attempts in all, the last deferred 5 s);
- a claim first hands out again what it handed out before and was never started, once the
  claim's answer may be lost (90 s) and the task's prepare lease (45 s, renewed by
  `prepare-lease`) has run out;
- `complete` and `fail` keep `retired_session_id` (never offered for resuming again),
  `branch_name` and `durable_work_dir`; `session_rollout_missing` clears the session and makes
  the next claim on the issue say `prior_session_resume_unavailable`;
- `session` pins a running task's session and work dir (204); `recover-orphans` fails what a
  restarted daemon's runtime left in flight (`runtime_recovery`) and retries each issue task
  once, at once, so the retry's claim offers the session that was pinned;
- an issue task's claim offers the agent's last session on that issue (`prior_session_id` on
  the same runtime, `prior_work_dir`) unless its latest run failed for a reason that poisons
  it (`GetLastTaskSession`), and unless the task names its own;
- messages are stored as sent, without any `(task, seq)` dedupe; usage is upserted per
  `(task, provider, model)`;
- a heartbeat for a deleted runtime is a 404 `runtime not found`, a task route for an
  unknown task a 404 `task not found`; a request queued for a runtime (the model list) is
  handed out by its next heartbeat only;
- `progress` takes `{summary, step, total}` for a known task (`ReportTaskProgress`);
- comments folded into a queued run come one by one to a daemon naming
  `coalesced-comments-v1`, else folded into the trigger comment (tests/fakes/multica_comments.py);
- a project's local directory in worktree mode is refused to a daemon without
  `local-worktree-v1`, and a task may wait for its folder (tests/fakes/multica_local.py);
- plugin hooks are called and plugin MCP credentials served for a daemon
  (tests/fakes/multica_plugins.py);
- the control WebSocket pushes `daemon:task_available` when a task is queued,
  `daemon:workspaces_changed` when a workspace is created, `daemon:pending_work` when a
  request waits for a runtime's heartbeat and `daemon:runtime_profiles_changed` when a custom
  runtime profile changes (`server/internal/daemonws/hub.go`), and answers the daemon's
  heartbeats and claims (multica_control.py);
- custom runtime profiles are listed and registered as tests/fakes/multica_profiles.py says;
  a deregister keeps each runtime's `offline_reasons` entry on it.

Test controls: queue Multica-shaped tasks, delete a runtime, cancel a task, make one
workspace's register fail with 404, drop the answer of the next N calls of a route after the
server has acted on them, and read back tasks, messages, usage, every request and every
control frame.

    async with multica_server() as fake:
        task_id = fake.queue_issue("issue-1")
        ... run a daemon against fake.url ...
        assert fake.tasks[task_id].status == "completed"
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from tests.fakes import multica_comments
from tests.fakes.loopback import serve_app
from tests.fakes.multica_control import serve_control
from tests.fakes.multica_gc import GcHandlers, Record
from tests.fakes.multica_plugins import Answer, PluginHandlers, Plugins
from tests.fakes.multica_profiles import FakeProfile, ProfileControls, ProfileHandlers
from tests.fakes.multica_routes import (
    IMPORT_BATCH,
    FakeRuntime,
    FakeTask,
    Handlers,
    SeenRequest,
    route_of,
)
from tests.fakes.multica_skills import SkillHandlers, for_claim
from tests.helpers import eventually


@dataclass
class MulticaFake(ProfileControls):
    """The server's state and its test controls; `app` serves it."""

    token: str = ""
    workspaces: dict[str, str] = field(default_factory=lambda: {str(uuid.uuid4()): "Main"})
    runtimes: dict[str, FakeRuntime] = field(default_factory=dict)
    tasks: dict[str, FakeTask] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    pending: dict[str, Any] = field(default_factory=dict)
    """`pending_*` actions every heartbeat answer carries (e.g. `{"pending_update": {...}}`)."""
    action_results: list[dict[str, Any]] = field(default_factory=list)
    """Results the daemon reported for pending actions: kind, runtime, request id and body."""
    url: str = ""
    watchers: list[tuple[frozenset[str], MemoryObjectSendStream[dict[str, Any] | str]]] = field(
        default_factory=list
    )
    _drops: Counter[str] = field(default_factory=Counter)
    _slow: dict[str, float] = field(default_factory=dict)
    refused_registers: set[str] = field(default_factory=set)
    issues: dict[str, Record] = field(default_factory=dict)
    chats: dict[str, Record] = field(default_factory=dict)
    autopilot_runs: dict[str, Record] = field(default_factory=dict)
    skill_edits: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Skill fields changed after a claim (resolve serves the current version)."""
    skills_by_reference: bool = True
    """Send skills as references to a daemon naming `skill-bundles-v1` (False: always whole)."""
    bundle_tamper: bool = False
    """Resolve sends bundles whose content no longer matches their hash."""
    batch_gc_unsupported: bool = False
    """Answer the batch gc-check route as a server older than it does (a router 404)."""
    cancelled_on_claim: set[str] = field(default_factory=set)
    raw_answers: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    """Hostile answers: route name → (status, headers, body) sent instead of the route's own."""
    repeat_claims: bool = False
    """Hostile claims: every task claimed so far (still in flight) comes again in each claim
    answer, and each new one twice."""
    control_redirect: str = ""
    """Hostile control route: answer the upgrade with a 302 to this location."""
    action_delay: float = 0.0
    """Seconds each pending-action result takes to be answered (a slow server)."""
    actions_in_flight: int = 0
    most_actions_in_flight: int = 0
    """The most pending-action results the server was answering at once."""
    repos: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    """Each workspace's repository list (`{"url", "description"}`), as register answers it."""
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each workspace's settings (`github_enabled`, `co_authored_by_enabled`, ...), as the
    register answer and the repository list carry them."""
    skill_imports: list[dict[str, str]] = field(default_factory=list)
    """Local skill imports a user asked for, not yet handed to a runtime: a heartbeat takes
    up to 10 from a daemon that says `supports_batch_import`, else one (Go's
    `processHeartbeat`); once handed out they are running and never handed out again."""
    claim_recovery: float = 90.0
    """Seconds after its claim before a task not started may be handed out again
    (`claimResponseRecoveryWindow`)..."""
    prepare_lease: float = 45.0
    """... once its prepare lease, from the claim or its last renewal, has run out."""
    plugins: Plugins = field(default_factory=Plugins)
    """Plugin installations, their hooks' answers and every hook call (multica_plugins.py)."""
    profiles: dict[str, FakeProfile] = field(default_factory=dict)
    """Custom runtime profiles by id (`add_profile`, `edit_profile`, `delete_profile`)."""
    profiles_route: bool = True
    """Serve the profiles route (False: a server older than it, a router 404)."""
    merged_runtimes: dict[str, str] = field(default_factory=dict)
    """Runtimes a register folded into another (old id → new id): registered under a
    `legacy_daemon_ids` entry, same workspace and provider (Go's `mergeLegacyRuntimes`)."""
    frames: list[SeenRequest] = field(default_factory=list)
    """Every control frame read: route = its type without `daemon:`, body = its payload."""
    ws_heartbeats: bool = True
    """Answer heartbeats on the control WebSocket (False: a server without the handler)."""
    rpc: bool = True
    """Answer requests on the control WebSocket (False: every one a 503, no RPC handler)."""
    progress: list[dict[str, Any]] = field(default_factory=list)
    """Progress posts taken: the task id and the body."""

    # --- test controls -------------------------------------------------------------------

    @property
    def workspace_id(self) -> str:
        """The first workspace (the only one unless a test adds more)."""
        return next(iter(self.workspaces))

    def add_workspace(self, name: str = "Other") -> str:
        """Give the daemon's token one more workspace; return its id."""
        workspace_id = str(uuid.uuid4())
        self.workspaces[workspace_id] = name
        return workspace_id

    def create_workspace(self, name: str = "New") -> str:
        """Create a workspace as a user would: Multica pushes `daemon:workspaces_changed` to
        every control connection of the account (here, the one token's); return its id."""
        workspace_id = self.add_workspace(name)
        self.send_frame('{"type": "daemon:workspaces_changed", "payload": {}}')
        return workspace_id

    def request_models(self, runtime_id: str) -> str:
        """A user opens the model picker: Multica queues a model-list request that the
        runtime's next heartbeat hands out, and pushes `daemon:pending_work` to the
        connections watching that runtime. Returns the request id."""
        request_id = str(uuid.uuid4())
        self.runtimes[runtime_id].queued["pending_model_list"] = {"id": request_id}
        self.push_pending_work(runtime_id)
        return request_id

    def push_pending_work(self, runtime_id: str, kind: str = "model_list") -> None:
        """Send `daemon:pending_work` for one runtime to the connections watching it."""
        frame = {"type": "daemon:pending_work", "payload": {"runtime_id": runtime_id, "kind": kind}}
        self._notify(frame, runtime_id)

    def add_repo(self, url: str, workspace_id: str = "", description: str = "") -> None:
        """Add a repository to a workspace's list (as `multica repo add` does)."""
        listed = self.repos.setdefault(workspace_id or self.workspace_id, [])
        listed.append({"url": url, "description": description})

    def queue(
        self,
        *,
        workspace_id: str = "",
        provider: str = "scripted",
        agent: dict[str, Any] | None = None,
        runtime_id: str = "",
        **fields: Any,
    ) -> str:
        """Queue a task with these claim fields for the `provider` runtime of a workspace (for
        `runtime_id`, with its provider, when the agent is bound to that one: a profile's)."""
        task_id = str(uuid.uuid4())
        agent_body = {
            "id": str(uuid.uuid4()),
            "name": "Multica Agent",
            "instructions": "",
            "custom_env": {},
            "custom_args": [],
            "model": "",
            **(agent or {}),
        }
        if runtime_id:
            provider = self.runtimes[runtime_id].provider
        task = FakeTask(task_id, workspace_id or self.workspace_id, provider, fields, agent_body)
        task.target_runtime = runtime_id
        self.tasks[task_id] = task
        self._announce(task)
        return task_id

    def _announce(self, task: FakeTask) -> None:
        # Multica's hub wakes every daemon connection watching a runtime the task can run on.
        for runtime in self.live_runtimes(task.workspace_id):
            if runtime.provider != task.provider:
                continue
            if task.target_runtime and runtime.id != task.target_runtime:
                continue
            frame = {
                "type": "daemon:task_available",
                "payload": {"runtime_id": runtime.id, "task_id": task.id},
            }
            self._notify(frame, runtime.id)

    def _notify(self, frame: dict[str, Any] | str, runtime_id: str = "") -> None:
        """Queue `frame` on each control connection watching `runtime_id` (every one: "").

        A connection whose queue is full is evicted, as Multica's hub evicts a slow client:
        its queue closes and the connection with it."""
        for entry in list(self.watchers):
            runtime_ids, stream = entry
            if runtime_id and runtime_id not in runtime_ids:
                continue
            try:
                stream.send_nowait(frame)
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self.watchers.remove(entry)
                stream.close()

    def install_hook(
        self,
        installation_id: str,
        hook_key: str,
        answer: Answer,
        workspace_id: str = "",
        credential: tuple[str, str] | None = None,
    ) -> None:
        """Install a plugin hook in a workspace: `answer(input)` is its output (raise
        `HookFailed` for a failed call); `credential` (header, value) for an `mcp` hook."""
        key = (installation_id, hook_key)
        self.plugins.hooks[key] = (workspace_id or self.workspace_id, answer)
        if credential is not None:
            self.plugins.credentials[key] = credential

    def queue_issue(self, issue_id: str = "", **options: Any) -> str:
        """An issue assigned to the agent (Multica's most common task)."""
        return self.queue(issue_id=issue_id or str(uuid.uuid4()), **options)

    def queue_comment(
        self,
        content: str,
        issue_id: str = "",
        coalesced: list[dict[str, str]] | None = None,
        **options: Any,
    ) -> str:
        """A comment on an issue that mentions the agent; `coalesced`: earlier comments folded
        into its run while queued (`id`, `thread_id`, `author_type`, `author_name`,
        `content`, `created_at`), handed out as tests/fakes/multica_comments.py says."""
        options.setdefault("trigger_comment_id", str(uuid.uuid4()))
        options.setdefault("trigger_author_type", "member")
        if coalesced:
            options["coalesced_comments"] = coalesced
        return self.queue_issue(issue_id, trigger_comment_content=content, **options)

    def queue_chat(self, message: str, **options: Any) -> str:
        """A message in a web chat with the agent."""
        options.setdefault("chat_session_id", str(uuid.uuid4()))
        return self.queue(chat_message=message, **options)

    def queue_autopilot(self, title: str, description: str = "", **options: Any) -> str:
        """A run-only autopilot run (no issue)."""
        options.setdefault("autopilot_run_id", str(uuid.uuid4()))
        options.setdefault("autopilot_id", str(uuid.uuid4()))
        return self.queue(autopilot_title=title, autopilot_description=description, **options)

    def queue_quick_create(self, text: str, **options: Any) -> str:
        """A quick-create request: one sentence to turn into an issue."""
        return self.queue(quick_create_prompt=text, **options)

    def set_issue(
        self, issue_id: str, status: str, updated_at: datetime, workspace_id: str = ""
    ) -> None:
        """Put an issue in a status, last changed at `updated_at` (what gc-check answers)."""
        self.issues[issue_id] = Record(workspace_id or self.workspace_id, status, updated_at)

    def shape_claim(self, body: dict[str, Any], capabilities: str) -> dict[str, Any]:
        """A claimed task as the daemon's `X-Client-Capabilities` have it sent (skills by
        reference, folded comments one by one)."""
        return multica_comments.for_claim(for_claim(self, body, capabilities), capabilities)

    def heartbeat_answer(self, runtime: FakeRuntime, batched: bool) -> dict[str, Any]:
        """What a heartbeat of `runtime` answers, over HTTP or the socket (Go's
        `processHeartbeat`): `ok`, and the pending actions it hands out (once each)."""
        queued, runtime.queued = runtime.queued, {}
        return {"status": "ok", **self.pending, **self._imports(batched), **queued}

    def _imports(self, batched: bool) -> dict[str, Any]:
        # Go pops a batch only for a daemon that says it reads one; the singular field carries
        # the first either way, for daemons that know only that field.
        queue = self.skill_imports
        taken = queue[: IMPORT_BATCH if batched else 1]
        del queue[: len(taken)]
        if not taken:
            return {}
        answer: dict[str, Any] = {"pending_local_skill_import": taken[0]}
        if batched:
            answer["pending_local_skill_imports"] = taken
        return answer

    def claim_tasks(
        self, body: dict[str, Any], capabilities: str, via: str
    ) -> tuple[int, dict[str, Any]]:
        """One claim, over HTTP or the socket (`via`): the status and the answer's body."""
        return Handlers(self).claim_tasks(body, capabilities, via)

    def close_control(self) -> None:
        """Close every open control connection (as a server restart or a proxy would)."""
        for _, stream in list(self.watchers):
            stream.close()

    def delete_runtime(self, runtime_id: str) -> None:
        """Delete a runtime as a user would: its heartbeats now get 404 `runtime not found`."""
        self.runtimes[runtime_id].deleted = True

    def cancel(self, task_id: str) -> None:
        """Cancel a task that is not yet terminal (as a user or a reassignment would)."""
        task = self.tasks[task_id]
        if task.status in ("queued", "dispatched", "running", "waiting_local_directory"):
            task.status = "cancelled"

    def cancel_when_claimed(self, task_id: str) -> None:
        """Cancel the task right after a daemon claims it, before that daemon can `start` it."""
        self.cancelled_on_claim.add(task_id)

    def queue_skill_import(self, skill_key: str) -> str:
        """A user asks a runtime to import one of its local skills; return the request id."""
        request_id = str(uuid.uuid4())
        self.skill_imports.append({"id": request_id, "skill_key": skill_key})
        return request_id

    def refuse_register(self, workspace_id: str) -> None:
        """Answer this workspace's registrations with 404 `workspace not found`."""
        self.refused_registers.add(workspace_id)

    def answer_raw(
        self, route: str, body: bytes, *, status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        """Answer every call of `route` with these bytes (and headers), whatever it asked."""
        self.raw_answers[route] = (
            status,
            {"content-type": "application/json", **(headers or {})},
            body,
        )

    def send_frame(self, frame: str) -> None:
        """Send one raw text frame on every open control connection."""
        self._notify(frame)

    def drop_answers(self, route: str, count: int = 1) -> None:
        """Act on the next `count` calls of `route`, then cut the connection, not answering."""
        self._drops[route] += count

    def slow_answers(self, route: str, seconds: float) -> None:
        """Act on every call of `route` at once, then answer it `seconds` later."""
        self._slow[route] = seconds

    async def finished(self, task_id: str, within: float = 60.0) -> FakeTask:
        """The task once a daemon reported it completed or failed (bounded by `within`)."""
        await eventually(lambda: self.tasks[task_id].status in ("completed", "failed"), within)
        return self.tasks[task_id]

    def seen(self, route: str) -> list[SeenRequest]:
        """The requests read for one route, in order."""
        return [r for r in self.requests if r.route == route]

    def messages_of(self, task_id: str) -> list[dict[str, Any]]:
        """Every message row stored for a task, duplicates included, in arrival order."""
        return [m for m in self.messages if m["task_id"] == task_id]

    def live_runtimes(self, workspace_id: str = "") -> list[FakeRuntime]:
        """Runtimes not deleted (in one workspace, if given)."""
        return [
            r
            for r in self.runtimes.values()
            if not r.deleted and (not workspace_id or r.workspace_id == workspace_id)
        ]

    # --- serving -------------------------------------------------------------------------

    @property
    def app(self) -> _DroppingApp:
        """The ASGI app: the routes behind the answer-dropping control."""
        h, gc, skills = Handlers(self), GcHandlers(self), SkillHandlers(self)
        plugins = PluginHandlers(self)
        profiles = ProfileHandlers(self)
        daemon = "/api/daemon"
        resolve = daemon + "/runtimes/{rid}/tasks/{tid}/skill-bundles/resolve"
        routes = [
            Route(resolve, skills.resolve, methods=["POST"]),
            Route(
                daemon + "/runtimes/{rid}/tasks/{tid}/prepare-lease",
                h.prepare_lease,
                methods=["POST"],
            ),
            Route(daemon + "/tasks/{id}/plugin-hooks", plugins.invoke, methods=["POST"]),
            Route(
                daemon + "/tasks/{id}/plugin-mcp/{cid}/credential",
                plugins.credential,
                methods=["GET"],
            ),
            Route(daemon + "/workspaces/{ws}/issues/gc-check", gc.issues, methods=["POST"]),
            Route(daemon + "/issues/{id}/gc-check", gc.issue, methods=["GET"]),
            Route(daemon + "/chat-sessions/{id}/gc-check", gc.chat, methods=["GET"]),
            Route(daemon + "/autopilot-runs/{id}/gc-check", gc.autopilot_run, methods=["GET"]),
            Route(daemon + "/tasks/{id}/gc-check", gc.task, methods=["GET"]),
            Route("/api/daemon/workspaces", h.workspaces, methods=["GET"]),
            Route("/api/daemon/workspaces/{wid}/repos", h.workspace_repos, methods=["GET"]),
            Route("/api/daemon/workspaces/{wid}/runtime-profiles", profiles.list, methods=["GET"]),
            Route("/api/daemon/register", h.register, methods=["POST"]),
            Route("/api/daemon/deregister", h.deregister, methods=["POST"]),
            Route("/api/daemon/heartbeat", h.heartbeat, methods=["POST"]),
            Route("/api/daemon/tasks/claim", h.claim, methods=["POST"]),
            Route("/api/daemon/claim", h.claim, methods=["POST"]),
            Route("/api/daemon/runtimes/{rid}/recover-orphans", h.recover, methods=["POST"]),
            Route("/api/daemon/tasks/{tid}/status", h.status, methods=["GET"]),
            Route("/api/daemon/tasks/{tid}/start", h.start, methods=["POST"]),
            Route(
                "/api/daemon/tasks/{tid}/wait-local-directory",
                h.wait_local_directory,
                methods=["POST"],
            ),
            Route("/api/daemon/tasks/{tid}/complete", h.complete, methods=["POST"]),
            Route("/api/daemon/tasks/{tid}/fail", h.fail, methods=["POST"]),
            Route("/api/daemon/tasks/{tid}/messages", h.add_messages, methods=["POST"]),
            Route("/api/daemon/tasks/{tid}/messages", h.list_messages, methods=["GET"]),
            Route("/api/daemon/tasks/{tid}/usage", h.add_usage, methods=["POST"]),
            Route("/api/daemon/tasks/{tid}/session", h.pin_session, methods=["POST"]),
            Route("/api/daemon/tasks/{tid}/cancel-ack", h.cancel_ack, methods=["POST"]),
            Route("/api/daemon/tasks/{tid}/progress", h.progress, methods=["POST"]),
            Route("/api/tokens/current/renew", h.renew, methods=["POST"]),
            Route(
                "/api/daemon/runtimes/{rid}/{kind:path}/{request_id}/result",
                h.action_result,
                methods=["POST"],
            ),
            WebSocketRoute("/api/daemon/ws", self._control),
        ]
        return _DroppingApp(self, Starlette(routes=routes))

    async def _control(self, websocket: WebSocket) -> None:
        await serve_control(self, websocket)

    def delay_of(self, route: str) -> float:
        """Seconds this route's answers are held back (0: none)."""
        return self._slow.get(route, 0.0)

    def take_drop(self, route: str) -> bool:
        """Whether this call's answer is to be dropped (and count it off)."""
        if self._drops[route] <= 0:
            return False
        self._drops[route] -= 1
        return True


class _DroppingApp:
    """Runs every request to the end, then loses (or holds back) the answer of the calls a test
    asked to drop (or slow down)."""

    def __init__(self, fake: MulticaFake, app: Starlette) -> None:
        self.fake = fake
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = route_of(scope["path"]) if scope["type"] == "http" else ""
        raw = self.fake.raw_answers.get(route) if route else None
        if raw is not None:
            status, headers, body = raw
            self.fake.requests.append(SeenRequest(route, scope["path"], None))
            await Response(body, status_code=status, headers=headers)(scope, receive, send)
            return
        if delay := self.fake.delay_of(route):

            async def late(message: Message) -> None:
                if message["type"] == "http.response.start":
                    await anyio.sleep(delay)  # the handler has acted; only the answer waits
                await send(message)

            await self.app(scope, receive, late)
            return
        if not route or not self.fake.take_drop(route):
            await self.app(scope, receive, send)
            return

        async def swallow(message: Message) -> None:
            del message  # the server acted; its answer is what gets lost

        await self.app(scope, receive, swallow)
        # Headers promising a body that never comes: uvicorn closes the connection when the
        # app returns mid-body, so the client sees the answer cut off, as after a lost reply.
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"64")]}
        )
        await send({"type": "http.response.body", "body": b"{", "more_body": True})


@asynccontextmanager
async def multica_server(token: str = "") -> AsyncIterator[MulticaFake]:
    """A fresh Multica-faithful server on a free loopback port; `fake.url` is its base URL."""
    fake = MulticaFake(token=token)
    async with serve_app(fake.app) as url:
        fake.url = url
        yield fake
