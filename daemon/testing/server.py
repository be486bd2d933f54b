"""One fake task server in memory: it records every call, fails calls as a test scripts them,
answers task statuses and keeps the transcript, usage and reports it took.

It fits `TaskServer` (what a task's run, its transcript and the outbox call) and the few calls
the worker makes besides (workspaces, register, heartbeat, claim, recover-orphans, deregister,
a workspace's repositories, the token renewal's POST), so the task core and the worker are
tested without HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from daemon.errors import PermanentServerError, TaskGoneError
from daemon.protocol.client import HookAnswer
from daemon.protocol.models import RepoRef, Skill, SkillRef, Task
from daemon.protocol.reports import TerminalReport, UsageEntry
from daemon.protocol.runtime_models import (
    FailedProfile,
    HeartbeatResponse,
    OfflineReason,
    RecoverOrphansResponse,
    RegisteredRuntime,
    RegisterResponse,
    RuntimeInfo,
    RuntimeProfiles,
    Workspace,
    WorkspaceRepos,
)

T = TypeVar("T")

TASK_CALLS = (
    "start_task",
    "task_status",
    "send_messages",
    "pin_session",
    "extend_prepare_lease",
    "wait_local_directory",
    "invoke_plugin_hook",
    "remote_mcp_credential",
    "report_usage",
    "send_report",
    "report_progress",
)
"""The calls of `TaskServer`: those a forgotten task answers with `TaskGoneError`."""
_ENDPOINTS = {
    "start_task": "start",
    "task_status": "status",
    "send_messages": "messages",
    "report_usage": "usage",
    "pin_session": "session",
    "extend_prepare_lease": "prepare_lease",
    "wait_local_directory": "wait_local_directory",
    "invoke_plugin_hook": "plugin_hook",
    "remote_mcp_credential": "mcp_credential",
    "report_progress": "progress",
}
"""The endpoint each call names in its errors, as the real client's do."""
_SETTLED = {"complete": "completed", "fail": "failed", "cancel_ack": "cancelled"}
"""The status a task has on the server after each terminal call."""


@dataclass(frozen=True, slots=True)
class Call:
    """One call the fake took: the method, its task ('' for the worker's calls), and whether
    the caller allowed retries."""

    method: str
    task_id: str = ""
    retry: bool = True


@dataclass(slots=True)
class _Fault:
    method: str
    error: Exception
    times: int | None
    task_id: str | None


class FakeTaskServer:
    """A server in memory for one or many tasks; every call is recorded in `calls`.

    Script it with `fail` (any call raises, a number of times or until `heal`), `refuse_messages`
    (a 400 for batches holding a matching message), `forget` (the task is gone), `set_status`
    (e.g. cancelled on the server), `hold` (a transcript send waits) and `queue` (tasks to claim).
    """

    def __init__(self, *, status: str = "running", workspaces: Sequence[str] = ("ws-1",)) -> None:
        """`status`: what `task_status` answers for a task it has no status for."""
        self.calls: list[Call] = []
        self.default_status = status
        self.statuses: dict[str, str] = {}
        self.batches: list[list[dict[str, Any]]] = []
        """Every transcript batch offered, in order, taken or not."""
        self.transcripts: dict[str, list[dict[str, Any]]] = {}
        """The transcript messages taken, per task."""
        self.usage: dict[str, list[UsageEntry]] = {}
        self.reports: dict[str, list[TerminalReport]] = {}
        """The terminal calls taken, per task."""
        self.pins: dict[str, list[tuple[str, str]]] = {}
        """The (session, work dir) pins taken, per task, in order."""
        self.progress: dict[str, list[tuple[str, int, int]]] = {}
        """The progress posts (summary, step, total) taken, per task, in order."""
        self.hold: anyio.Event | None = None
        """While set, a transcript send waits for this event before it is answered."""
        self.sending = anyio.Event()
        """Set once the first transcript batch arrived."""
        self.names_status = False
        """Answer each transcript batch with the task's status (as Multica's header does)."""
        self.workspace_ids = list(workspaces)
        self.repos: dict[str, list[RepoRef]] = {}
        """Each workspace's repositories, as register and `workspace_repos` answer them."""
        self.claims: list[int] = []
        """The `max_tasks` of each claim, in order."""
        self.deregistered: list[str] = []
        self.bundles: dict[tuple[str, str], Skill] = {}
        """Skill bundles `resolve_skill_bundle` serves, by (source, id); others are a 404."""
        self.waits: dict[str, list[str]] = {}
        """The reasons each task said it waits for its local directory, in order."""
        self.hook_calls: list[tuple[str, str, str, Any]] = []
        """Plugin hook calls: (task, installation, hook, input), in order."""
        self.hook_answers: dict[str, HookAnswer] = {}
        """What each hook key answers (others: `ok` with the input echoed)."""
        self.credentials: dict[str, dict[str, str]] = {}
        """Each remote MCP contribution's credential header (others: a 404)."""
        self._queued: list[Task] = []
        self._faults: list[_Fault] = []
        self._refusals: list[Callable[[Mapping[str, Any]], bool]] = []
        self._gone: set[str] = set()

    # -- scripting ------------------------------------------------------------------------

    def fail(
        self, method: str, error: Exception, *, times: int | None = None, task_id: str | None = None
    ) -> None:
        """Make `method` raise `error` (for `task_id` only, if given) the next `times` calls,
        or every call until `heal`. Faults are consulted in the order they were added."""
        self._faults.append(_Fault(method, error, times, task_id))

    def heal(self, method: str | None = None) -> None:
        """Drop the scripted failures of `method` (of every method when None)."""
        self._faults = [f for f in self._faults if method is not None and f.method != method]

    def refuse_messages(self, refused: Callable[[Mapping[str, Any]], bool]) -> None:
        """Refuse (400) every transcript batch that holds a message `refused` matches, as a
        server refuses a body it cannot store."""
        self._refusals.append(refused)

    def forget(self, task_id: str) -> None:
        """The server no longer knows the task: its calls raise `TaskGoneError`."""
        self._gone.add(task_id)

    def set_status(self, task_id: str, status: str) -> None:
        """The task's status on the server from now on (e.g. `cancelled`)."""
        self.statuses[task_id] = status

    def queue(self, *tasks: Task) -> None:
        """Tasks waiting to be claimed, handed out in order."""
        self._queued.extend(tasks)
        for task in tasks:
            self.statuses.setdefault(task.id, "queued")

    # -- reading what happened ------------------------------------------------------------

    def status_of(self, task_id: str) -> str:
        """The task's status on the server now."""
        return self.statuses.get(task_id, self.default_status)

    def count(self, method: str, task_id: str | None = None) -> int:
        """How many `method` calls arrived (for `task_id` only, if given)."""
        return sum(1 for c in self.calls if c.method == method and task_id in (None, c.task_id))

    def messages(self, task_id: str) -> list[dict[str, Any]]:
        """The task's transcript messages the server took, in order."""
        return self.transcripts.get(task_id, [])

    def seqs(self, task_id: str) -> list[int]:
        """The `seq` of each transcript message taken for the task."""
        return [m["seq"] for m in self.messages(task_id)]

    @property
    def waiting(self) -> int:
        """Tasks queued and not claimed yet."""
        return len(self._queued)

    # -- TaskServer -----------------------------------------------------------------------

    async def start_task(self, task_id: str) -> None:
        """Acknowledge the start: the task is running."""
        self._take("start_task", task_id)
        self.statuses[task_id] = "running"

    async def report_progress(self, task_id: str, summary: str, step: int, total: int) -> None:
        """Take a progress post (kept in `progress`)."""
        self._take("report_progress", task_id)
        self.progress.setdefault(task_id, []).append((summary, step, total))

    async def task_status(self, task_id: str) -> str:
        """The task's status."""
        self._take("task_status", task_id)
        return self.status_of(task_id)

    async def send_messages(
        self, task_id: str, messages: Sequence[Mapping[str, Any]], *, retry: bool = True
    ) -> str | None:
        """Take a transcript batch (after `hold`, unless failed or refused)."""
        batch = [dict(m) for m in messages]
        self.batches.append(batch)
        self.sending.set()
        if self.hold is not None:
            await self.hold.wait()
        self._take("send_messages", task_id, retry)
        if any(refused(m) for m in batch for refused in self._refusals):
            raise PermanentServerError("messages", "content: invalid", 400)
        self.transcripts.setdefault(task_id, []).extend(batch)
        return self.status_of(task_id) if self.names_status else None

    async def pin_session(self, task_id: str, session_id: str, work_dir: str) -> None:
        """Take the running agent's session and work directory (`pins`)."""
        self._take("pin_session", task_id)
        self.pins.setdefault(task_id, []).append((session_id, work_dir))

    async def extend_prepare_lease(self, runtime_id: str, task_id: str) -> None:
        """Take a renewal of the task's prepare lease (`count("extend_prepare_lease")`)."""
        self._take("extend_prepare_lease", task_id)

    async def wait_local_directory(self, task_id: str, reason: str) -> None:
        """Take the task's wait for its local directory (`waits`)."""
        self._take("wait_local_directory", task_id)
        self.waits.setdefault(task_id, []).append(reason)
        self.statuses[task_id] = "waiting_local_directory"

    async def invoke_plugin_hook(
        self, token: str, task_id: str, installation_id: str, hook_key: str, arguments: Any
    ) -> HookAnswer:
        """One plugin hook call (`hook_calls`): its scripted answer, else its input back."""
        self._take("invoke_plugin_hook", task_id)
        self.hook_calls.append((task_id, installation_id, hook_key, arguments))
        return self.hook_answers.get(hook_key) or HookAnswer(True, json.dumps(arguments))

    async def remote_mcp_credential(
        self, token: str, task_id: str, contribution_id: str
    ) -> dict[str, str]:
        """A contribution's credential header (`credentials`), else a 404."""
        self._take("remote_mcp_credential", task_id)
        if contribution_id not in self.credentials:
            raise PermanentServerError("mcp_credential", "credential not found", 404)
        return self.credentials[contribution_id]

    async def report_usage(
        self, task_id: str, usage: Sequence[UsageEntry], *, retry: bool = True
    ) -> None:
        """Take the task's usage."""
        self._take("report_usage", task_id, retry)
        self.usage.setdefault(task_id, []).extend(usage)

    async def send_report(
        self, task_id: str, report: TerminalReport, *, retry: bool = True
    ) -> None:
        """Take the task's terminal call; the task is settled accordingly."""
        self._take("send_report", task_id, retry)
        self.reports.setdefault(task_id, []).append(report)
        self.statuses[task_id] = _SETTLED.get(report.kind, self.status_of(task_id))

    async def resolve_skill_bundle(self, runtime_id: str, task_id: str, ref: SkillRef) -> Skill:
        """The bundle of a skill the task names by reference (`bundles`), else a 404."""
        self._take("resolve_skill_bundle", task_id)
        bundle = self.bundles.get((ref.source, ref.id))
        if bundle is None:
            raise PermanentServerError("skill_bundle", "skill not found", 404)
        return bundle

    # -- the worker's calls ---------------------------------------------------------------

    async def workspaces(self) -> list[Workspace]:
        """The workspaces the daemon serves."""
        self._take("workspaces")
        return [Workspace(id=w, name=w) for w in self.workspace_ids]

    # The client's own signature, spelt out: the fake stands in for `ServerClient.register`.
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
        """One runtime per backend, named `<workspace>/<backend>`."""
        # The signature is `ServerClient.register`'s, word for word, on purpose: the worker is
        # handed this fake as its client, so it must take exactly what the worker sends.
        self._take("register")
        answer = [
            RegisteredRuntime(id=f"{workspace_id}/{r.type}", name=r.name, provider=r.type)
            for r in runtimes
        ]
        return RegisterResponse(runtimes=answer, repos=self.repos.get(workspace_id, []))

    async def runtime_profiles(self, workspace_id: str) -> RuntimeProfiles:
        """No custom runtime profiles."""
        self._take("runtime_profiles")
        return RuntimeProfiles(workspace_id=workspace_id)

    async def workspace_repos(self, workspace_id: str) -> WorkspaceRepos:
        """The workspace's repositories now."""
        self._take("workspace_repos")
        repos = self.repos.get(workspace_id, [])
        return WorkspaceRepos(workspace_id=workspace_id, repos=repos)

    async def heartbeat(self, runtime_id: str) -> HeartbeatResponse:
        """Alive, with nothing pending."""
        self._take("heartbeat")
        return HeartbeatResponse()

    async def recover_orphans(self, runtime_id: str) -> RecoverOrphansResponse:
        """Nothing left over."""
        self._take("recover_orphans")
        return RecoverOrphansResponse()

    async def claim(self, daemon_id: str, runtime_ids: Sequence[str], max_tasks: int) -> list[Task]:
        """Up to `max_tasks` queued tasks, oldest first; each is dispatched."""
        self._take("claim")
        self.claims.append(max_tasks)
        claimed, self._queued = self._queued[:max_tasks], self._queued[max_tasks:]
        for task in claimed:
            self.statuses[task.id] = "dispatched"
        return claimed

    async def deregister(
        self, runtime_ids: Sequence[str], reasons: Mapping[str, OfflineReason] | None = None
    ) -> None:
        """Note the runtimes going away."""
        self._take("deregister")
        self.deregistered.extend(runtime_ids)

    async def post(
        self, endpoint: str, path: str, body: dict[str, Any], parse: Callable[[Any], T]
    ) -> T:
        """The other POSTs (token renewal, runtime actions): this server has no such route."""
        self._take("post")
        raise PermanentServerError(endpoint, "not found", 404)

    def _take(self, method: str, task_id: str = "", retry: bool = True) -> None:
        """Record the call; raise what the script says it raises."""
        self.calls.append(Call(method, task_id, retry))
        if task_id in self._gone and method in TASK_CALLS:
            raise TaskGoneError(_ENDPOINTS.get(method, "report"), "task not found", 404)
        for fault in self._faults:
            if fault.method != method or fault.task_id not in (None, task_id):
                continue
            if fault.times is not None:
                fault.times -= 1
                if fault.times == 0:
                    self._faults.remove(fault)
            raise fault.error
