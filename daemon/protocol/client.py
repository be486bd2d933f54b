"""The daemon's client of the server protocol, over an injected httpx client.

Every call goes through `Caller` (caller.py): retries per its `RetryPolicy`, errors mapped onto
daemon/errors.py, the circuit breaker and the metrics. Terminal reports use the longer report
policy inside a shielded cancel scope with its own deadline, so cancelling the caller cannot cut
a task's result short; only the shutdown budget (a stopping daemon) shortens them, and what then
does not get through is kept in the outbox. A result the server refuses goes again shorter,
then as a `fail` saying why.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import anyio

from daemon.errors import (
    MalformedResponseError,
    PermanentServerError,
    ServerError,
    TransientServerError,
)
from daemon.logs import short_id
from daemon.protocol.answers import Answered
from daemon.protocol.caller import Caller, T
from daemon.protocol.control_rpc import ControlCalls, RpcAnswer
from daemon.protocol.http_client import make_http_client as make_http_client
from daemon.protocol.models import (
    ClaimRequest,
    Skill,
    SkillRef,
    Task,
    TaskStatusResponse,
    WireModel,
)
from daemon.protocol.reports import TerminalReport, TranscriptMessage, UsageBody, UsageEntry
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.runtime_models import (
    DeregisterRequest,
    FailedProfile,
    HeartbeatRequest,
    HeartbeatResponse,
    OfflineReason,
    RecoverOrphansResponse,
    RegisterRequest,
    RegisterResponse,
    RuntimeInfo,
    RuntimeProfiles,
    Workspace,
    WorkspaceRepos,
)
from daemon.protocol.wire import (
    DAEMON_ID_HEADER,
    TASK_STATUS_HEADER,
    answer_json,
    claim_tasks,
    describe_parse_error,
    error_for_status,
    ignore_body,
    parse_claim,
    parse_model,
    parse_workspaces,
    refuses_task,
    task_path,
)
from daemon.shutdown import REPORT_CALL

log = logging.getLogger(__name__)

_SINGLE_TRY = RetryPolicy.never()
_STATUS_MAX = 32
"""A task status named in a header is a short word; anything longer is not one."""


class ServerClient(Caller):
    """Calls the server's daemon endpoints with retries, error mapping and metrics."""

    async def workspaces(self) -> list[Workspace]:
        """The workspaces this daemon's token serves."""
        return await self._call("workspaces", "GET", "/api/daemon/workspaces", parse_workspaces)

    async def register(
        self,
        workspace_id: str,
        daemon_id: str,
        device_name: str,
        cli_version: str,
        runtimes: Sequence[RuntimeInfo],
        legacy_daemon_ids: Sequence[str] = (),
        failed_profiles: Sequence[FailedProfile] = (),
    ) -> RegisterResponse:
        """Register this daemon's backends in one workspace; returns the server's runtimes.
        `failed_profiles`: the workspace's custom runtimes this machine cannot run."""
        # From now on every call says which daemon it comes from (the embedded server checks it).
        self._http.headers[DAEMON_ID_HEADER] = daemon_id
        body = RegisterRequest(
            workspace_id=workspace_id,
            daemon_id=daemon_id,
            device_name=device_name,
            cli_version=cli_version,
            runtimes=list(runtimes),
            legacy_daemon_ids=list(legacy_daemon_ids),
            failed_profiles=list(failed_profiles),
        )
        return await self._call("register", "POST", "/api/daemon/register", self._registered, body)

    async def runtime_profiles(self, workspace_id: str) -> RuntimeProfiles:
        """The workspace's enabled custom runtime profiles (tried once; an older server has
        no such route and answers 404)."""
        path = f"/api/daemon/workspaces/{quote(workspace_id, safe='')}/runtime-profiles"
        parse = parse_model(RuntimeProfiles)
        return await self._call("runtime_profiles", "GET", path, parse, None, _SINGLE_TRY)

    async def workspace_repos(self, workspace_id: str) -> WorkspaceRepos:
        """The workspace's repository list as the server has it now (tried once)."""
        path = f"/api/daemon/workspaces/{quote(workspace_id, safe='')}/repos"
        parse = parse_model(WorkspaceRepos)
        return await self._call("workspace_repos", "GET", path, parse, None, _SINGLE_TRY)

    async def recover_orphans(self, runtime_id: str) -> RecoverOrphansResponse:
        """Have the server fail the tasks this runtime left in flight before a crash."""
        path = f"/api/daemon/runtimes/{quote(runtime_id, safe='')}/recover-orphans"
        parse = parse_model(RecoverOrphansResponse)
        return await self._call("recover_orphans", "POST", path, parse, {})

    async def heartbeat(self, runtime_id: str) -> HeartbeatResponse:
        """Tell the server this runtime is alive."""
        body, parse = HeartbeatRequest(runtime_id=runtime_id), parse_model(HeartbeatResponse)
        return await self._call("heartbeat", "POST", "/api/daemon/heartbeat", parse, body)

    async def claim(self, daemon_id: str, runtime_ids: Sequence[str], max_tasks: int) -> list[Task]:
        """Claim up to `max_tasks` tasks; the caller asks `circuit.allow()` first. A task that
        does not fit the protocol is logged and failed on the server (`invalid_task`), so it
        neither costs the others nor stays dispatched to this daemon forever."""
        body = ClaimRequest(daemon_id=daemon_id, runtime_ids=list(runtime_ids), max_tasks=max_tasks)
        tasks, rejected = await self._call(
            "claim", "POST", "/api/daemon/tasks/claim", parse_claim, body
        )
        return await self._claimed(tasks, rejected)

    async def claim_over(
        self,
        calls: ControlCalls,
        daemon_id: str,
        runtime_ids: Sequence[str],
        max_tasks: int,
        budget: float,
        grace: float,
    ) -> list[Task]:
        """`claim` as a `tasks.claim` request on the control WebSocket, the server given
        `budget` seconds and the answer `grace` more; its errors as control_rpc.py says, a
        non-2xx answer as over HTTP."""
        body = ClaimRequest(daemon_id=daemon_id, runtime_ids=list(runtime_ids), max_tasks=max_tasks)
        started = time.perf_counter()
        answer = await calls.call("tasks.claim", body.model_dump(mode="json"), budget, grace)
        if not answer.ok:
            self._observe("claim_socket", "refused", started, reached=True)
            raise error_for_status("claim", answer.status, _rpc_error(answer))
        try:
            tasks, rejected = claim_tasks(answer.body)
        except ValueError as exc:
            self._observe("claim_socket", "malformed", started, reached=True)
            raise MalformedResponseError(
                "claim", describe_parse_error(exc), answer.status
            ) from None
        self._observe("claim_socket", "ok", started, reached=True)
        return await self._claimed(tasks, rejected)

    async def _claimed(self, tasks: list[Task], rejected: list[tuple[str, str]]) -> list[Task]:
        for task_id, reason in rejected:
            log.error("claim: task %s does not fit the protocol: %s", task_id, reason)
            if task_id:
                await self._reject(task_id, reason)
        return tasks

    async def start_task(self, task_id: str) -> None:
        """Tell the server the task's work directory exists and the agent is starting."""
        await self._call("start", "POST", task_path(task_id, "start"), ignore_body, {})

    async def report_progress(self, task_id: str, summary: str, step: int, total: int) -> None:
        """Tell the server (and so its UI) where the task is (one try)."""
        body = {"summary": summary, "step": step, "total": total}
        path = task_path(task_id, "progress")
        await self._call("progress", "POST", path, ignore_body, body, _SINGLE_TRY)

    async def send_messages(
        self,
        task_id: str,
        messages: Sequence[TranscriptMessage | Mapping[str, Any]],
        *,
        retry: bool = True,
    ) -> str | None:
        """Append a batch of transcript messages (models, or dicts already in wire shape);
        the task's status if the answer named it (`X-Task-Status`, this project's server).

        `retry=False` tries once (the outbox re-sends on its own schedule). A batch that may
        have been stored but whose answer was lost is sent again only to a server that said it
        stores each (task, seq) once (`dedupes`); otherwise that is `UnconfirmedError`.
        """
        # The transcript hands in plain dicts on its hot path; validating 1,000 of them again
        # per batch would cost more than draining them did.
        wire = [
            m.model_dump(mode="json", exclude_none=True) if isinstance(m, WireModel) else m
            for m in messages
        ]
        policy = None if retry else _SINGLE_TRY
        path = task_path(task_id, "messages")
        body = {"messages": wire}
        return await self._call(
            "messages", "POST", path, self._transcript_answer, body, policy, resend=self.dedupes
        )

    async def task_status(self, task_id: str) -> str:
        """The task's status on the server; `TaskGoneError` if the server forgot it."""
        path = task_path(task_id, "status")
        return (await self._call("status", "GET", path, parse_model(TaskStatusResponse))).status

    async def pin_session(self, task_id: str, session_id: str, work_dir: str) -> None:
        """Record the agent's session and work directory on the task while it runs (one try):
        a retry after a daemon crash resumes them."""
        body = {k: v for k, v in (("session_id", session_id), ("work_dir", work_dir)) if v}
        path = task_path(task_id, "session")
        await self._call("session", "POST", path, ignore_body, body, _SINGLE_TRY)

    async def extend_prepare_lease(self, runtime_id: str, task_id: str) -> None:
        """Keep a claimed task ours while its setup runs long (one try): past its lease the
        server hands a task not yet started to a claim again."""
        path = (
            f"/api/daemon/runtimes/{quote(runtime_id, safe='')}"
            f"/tasks/{quote(task_id, safe='')}/prepare-lease"
        )
        await self._call("prepare_lease", "POST", path, ignore_body, {}, _SINGLE_TRY)

    async def wait_local_directory(self, task_id: str, reason: str) -> None:
        """Tell the server the task waits for its local directory (one try): the UI shows it
        `waiting_local_directory`, with `reason`, until `start`."""
        body = {"reason": reason}
        path = task_path(task_id, "wait-local-directory")
        await self._call("wait_local_directory", "POST", path, ignore_body, body, _SINGLE_TRY)

    async def invoke_plugin_hook(
        self, token: str, task_id: str, installation_id: str, hook_key: str, arguments: Any
    ) -> HookAnswer:
        """One plugin hook call the agent made as a tool (one try): the server calls the
        plugin. `token` is the claim's task-scoped daemon token ("": the daemon's own)."""
        body: dict[str, Any] = {"installation_id": installation_id, "hook_key": hook_key}
        if arguments is not None:
            body["input"] = arguments
        path = task_path(task_id, "plugin-hooks")
        return await self._call(
            "plugin_hook", "POST", path, _hook_answer, body, _SINGLE_TRY, token=token or None
        )

    async def remote_mcp_credential(
        self, token: str, task_id: str, contribution_id: str
    ) -> dict[str, str]:
        """The header a remote MCP connection's requests carry (name → value; empty when it
        needs none), asked at the moment it is needed, never kept in a claim. A plugin's
        connection (`plugin:` id) is served by the plugin route."""
        route = "plugin-mcp" if contribution_id.startswith(PLUGIN_CONTRIBUTION) else "remote-mcp"
        # Escaped as Go's `url.PathEscape` escapes a segment: Multica's router reads the id
        # from the raw path, so a `plugin:` id must keep its colons.
        path = (
            f"/api/daemon/tasks/{quote(task_id, safe='')}/{route}"
            f"/{quote(contribution_id, safe=':@&=+$')}/credential"
        )
        return await self._call(
            "mcp_credential", "GET", path, _credential, None, _SINGLE_TRY, token=token or None
        )

    async def report_usage(
        self, task_id: str, usage: Sequence[UsageEntry], *, retry: bool = True
    ) -> None:
        """Report the task's token usage per model (`retry=False`: one try, for the outbox)."""
        body = UsageBody(usage=list(usage))
        policy = None if retry else _SINGLE_TRY
        await self._call("usage", "POST", task_path(task_id, "usage"), ignore_body, body, policy)

    async def send_report(
        self, task_id: str, report: TerminalReport, *, retry: bool = True
    ) -> None:
        """Send the task's terminal call (long retries, shielded from cancellation).

        `retry=False` tries once (the outbox re-sends on its own schedule).
        """
        policy = self._report_policy if retry else _SINGLE_TRY
        deadline = self.report_deadline(retry=retry)
        endpoint = report.kind
        scope = anyio.CancelScope(deadline=anyio.current_time() + deadline, shield=True)
        with scope, self.budget.bounding(scope, REPORT_CALL):
            while True:
                path = task_path(task_id, report.endpoint)
                try:
                    await self._call(report.kind, "POST", path, ignore_body, report.body(), policy)
                    return
                except PermanentServerError as exc:
                    # A refused result must not leave the task running forever: it goes again
                    # shorter, then as a failure saying why. A task gone or a token refused
                    # would refuse any report.
                    instead = None if refuses_task(exc) else report.after_refusal(exc.message)
                    if instead is None:
                        raise
                    log.error(
                        "task %s: server refused the %s (%s); sending a %s instead",
                        short_id(task_id),
                        report.kind,
                        exc,
                        "shorter one" if instead.kind == report.kind else instead.kind,
                    )
                    report = instead
        if self.circuit is not None:
            self.circuit.record_failure()
        raise TransientServerError(endpoint, f"gave up at the report deadline ({deadline:.0f}s)")

    async def resolve_skill_bundle(self, runtime_id: str, task_id: str, ref: SkillRef) -> Skill:
        """One skill's bundle, by reference (`skill-bundles-v1`); its checks are the caller's."""
        path = (
            f"/api/daemon/runtimes/{quote(runtime_id, safe='')}"
            f"/tasks/{quote(task_id, safe='')}/skill-bundles/resolve"
        )
        body = {"skills": [ref.model_dump(mode="json")]}
        return await self._call("skill_bundle", "POST", path, _one_bundle, body)

    async def deregister(
        self, runtime_ids: Sequence[str], reasons: Mapping[str, OfflineReason] | None = None
    ) -> None:
        """Tell the server these runtimes are going away (at shutdown, or their CLI became
        unusable: `reasons` by runtime id)."""
        body = DeregisterRequest(
            runtime_ids=list(runtime_ids), offline_reasons=dict(reasons) if reasons else None
        )
        await self._call("deregister", "POST", "/api/daemon/deregister", ignore_body, body)

    def _transcript_answer(self, response: Answered) -> str | None:
        self._note_dedupe(response)
        status = response.headers.get(TASK_STATUS_HEADER, "").strip().lower()
        return status if 0 < len(status) <= _STATUS_MAX else None

    def _registered(self, response: Answered) -> RegisterResponse:
        self._note_dedupe(response)
        return RegisterResponse.model_validate(answer_json(response))

    async def post(
        self, endpoint: str, path: str, body: dict[str, Any], parse: Callable[[Answered], T]
    ) -> T:
        """One POST tried once, with this client's error mapping and metrics (protocol/ calls)."""
        return await self._call(endpoint, "POST", path, parse, body, _SINGLE_TRY)

    async def get(self, endpoint: str, path: str, parse: Callable[[Answered], T]) -> T:
        """One GET tried once, with this client's error mapping and metrics (protocol/ calls)."""
        return await self._call(endpoint, "GET", path, parse, None, _SINGLE_TRY)

    async def _reject(self, task_id: str, reason: str) -> None:
        report = TerminalReport(
            kind="fail",
            error=f"the daemon could not read this task: {reason}",
            failure_reason="invalid_task",
        )
        try:
            await self._call("fail", "POST", task_path(task_id, "fail"), ignore_body, report.body())
        except ServerError as exc:
            log.error("claim: could not fail invalid task %s: %s", task_id, exc)


_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
PLUGIN_CONTRIBUTION = "plugin:"
"""The prefix of a remote MCP connection a plugin contributed (its credential is the plugin's)."""


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What a plugin hook call came back with: its output as text, or why it did not work."""

    ok: bool
    text: str


def _hook_answer(response: Answered) -> HookAnswer:
    body = answer_json(response)
    if not isinstance(body, dict):
        raise ValueError("a plugin hook answer is an object")
    if body.get("status") != "ok":
        # A hook refused or failed comes back as a 200 with its status: a tool error.
        error = body.get("error")
        text = error if isinstance(error, str) and error else "the plugin hook did not succeed"
        return HookAnswer(False, text)
    output = body.get("output")
    if output is None or output == "":
        return HookAnswer(True, "")
    return HookAnswer(True, json.dumps(output, ensure_ascii=False, separators=(",", ":")))


def _credential(response: Answered) -> dict[str, str]:
    body = answer_json(response)
    if not isinstance(body, dict):
        raise ValueError("a credential answer is an object")
    header, value = body.get("credential_header"), body.get("credential")
    if not header:
        return {}
    if not isinstance(header, str) or not isinstance(value, str) or not _TOKEN.match(header):
        raise ValueError("a credential is a header name and a text value")
    if any(c in value for c in "\r\n\0"):
        raise ValueError("a credential's value is one line")
    return {header: value}


def _rpc_error(answer: RpcAnswer) -> str:
    """The error text of a non-2xx answer on the socket: its `error`, else the `error` of its
    body (Multica's claim handler answers as over HTTP, `{"error": "..."}`)."""
    body = answer.body
    if not answer.error and isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    return answer.error or f"status {answer.status}"


def _one_bundle(response: Answered) -> Skill:
    body = answer_json(response)
    bundles = body.get("bundles") if isinstance(body, dict) else None
    if not isinstance(bundles, list) or len(bundles) != 1:
        raise ValueError("a resolve answer holds exactly one bundle")
    return Skill.model_validate(bundles[0])
