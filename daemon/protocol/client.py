"""The daemon's client of the server protocol (PROTOCOL.md), over an injected httpx client.

Every call retries transient failures per its `RetryPolicy`, maps the rest onto
daemon/errors.py, records its outcome on the circuit breaker and in the metrics, and turns a 2xx
body that does not parse into `MalformedResponseError` for that one call. Terminal reports use
the longer report policy inside a shielded cancel scope with its own deadline, so cancelling the
caller cannot cut a task's result short; only `cut_reports` (a stopping daemon) shortens them,
and what then does not get through is kept in the outbox.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import httpx
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_json

from daemon.errors import (
    MalformedResponseError,
    PermanentServerError,
    ServerError,
    TransientServerError,
)
from daemon.ops.metrics import Metrics
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.models import (
    ClaimRequest,
    CompleteBody,
    DeregisterRequest,
    FailBody,
    HeartbeatRequest,
    HeartbeatResponse,
    RecoverOrphansResponse,
    RegisterRequest,
    RegisterResponse,
    RuntimeInfo,
    Task,
    TaskStatusResponse,
    TranscriptMessage,
    UsageBody,
    UsageEntry,
    WireModel,
    Workspace,
)
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.wire import (
    DAEMON_ID_HEADER,
    READ_TIMEOUT,
    describe_parse_error,
    describe_transport_error,
    error_for_response,
)
from daemon.protocol.wire import make_http_client as make_http_client

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=WireModel)

_WORKSPACES = TypeAdapter(list[Workspace])
_SINGLE_TRY = RetryPolicy.never()
_JSON_HEADERS = {"Content-Type": "application/json"}


def _model(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: model.model_validate(response.json())


def _ignore(response: httpx.Response) -> None:
    return None


def _task_path(task_id: str, action: str) -> str:
    # Quoted so a task id can never reach another path of the API.
    return f"/api/daemon/tasks/{quote(task_id, safe='')}/{action}"


class ServerClient:
    """Calls the server's daemon endpoints with retries, error mapping and metrics."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        metrics: Metrics | None = None,
        circuit: CircuitBreaker | None = None,
        policy: RetryPolicy | None = None,
        report_policy: RetryPolicy | None = None,
    ) -> None:
        self._http = http
        self._metrics = metrics
        self.circuit = circuit
        self._policy = policy or RetryPolicy()
        self._report_policy = report_policy or RetryPolicy.for_reports()
        self._report_cap: float | None = None
        self._reports: set[anyio.CancelScope] = set()

    async def workspaces(self) -> list[Workspace]:
        """The workspaces this daemon's token serves."""
        return await self._call(
            "workspaces",
            "GET",
            "/api/daemon/workspaces",
            lambda response: _WORKSPACES.validate_python(response.json()),
        )

    async def register(
        self,
        workspace_id: str,
        daemon_id: str,
        device_name: str,
        cli_version: str,
        runtimes: Sequence[RuntimeInfo],
    ) -> RegisterResponse:
        """Register this daemon's backends in one workspace; returns the server's runtimes."""
        # From now on every call says which daemon it comes from (the embedded server checks it).
        self._http.headers[DAEMON_ID_HEADER] = daemon_id
        body = RegisterRequest(
            workspace_id=workspace_id,
            daemon_id=daemon_id,
            device_name=device_name,
            cli_version=cli_version,
            runtimes=list(runtimes),
        )
        return await self._call(
            "register", "POST", "/api/daemon/register", _model(RegisterResponse), body
        )

    async def recover_orphans(self, runtime_id: str) -> RecoverOrphansResponse:
        """Have the server fail the tasks this runtime left in flight before a crash."""
        path = f"/api/daemon/runtimes/{quote(runtime_id, safe='')}/recover-orphans"
        return await self._call("recover_orphans", "POST", path, _model(RecoverOrphansResponse), {})

    async def heartbeat(self, runtime_id: str) -> HeartbeatResponse:
        """Tell the server this runtime is alive."""
        body = HeartbeatRequest(runtime_id=runtime_id)
        return await self._call(
            "heartbeat", "POST", "/api/daemon/heartbeat", _model(HeartbeatResponse), body
        )

    async def claim(self, daemon_id: str, runtime_ids: Sequence[str], max_tasks: int) -> list[Task]:
        """Claim up to `max_tasks` tasks; the caller asks `circuit.allow()` first.

        A task in the answer that does not fit the protocol does not cost the others: it is
        logged and failed on the server (`failure_reason: "invalid_task"`), so it is not left
        dispatched to this daemon forever.
        """
        body = ClaimRequest(daemon_id=daemon_id, runtime_ids=list(runtime_ids), max_tasks=max_tasks)
        tasks, rejected = await self._call(
            "claim", "POST", "/api/daemon/tasks/claim", _parse_claim, body
        )
        for task_id, reason in rejected:
            log.error("claim: task %s does not fit the protocol: %s", task_id, reason)
            if task_id:
                await self._reject(task_id, reason)
        return tasks

    async def start_task(self, task_id: str) -> None:
        """Tell the server the task's work directory exists and the agent is starting."""
        await self._call("start", "POST", _task_path(task_id, "start"), _ignore, {})

    async def send_messages(
        self,
        task_id: str,
        messages: Sequence[TranscriptMessage | Mapping[str, Any]],
        *,
        retry: bool = True,
    ) -> None:
        """Append a batch of transcript messages (models, or dicts already in wire shape).

        `retry=False` tries once (the outbox re-sends on its own schedule).
        """
        # The transcript hands in plain dicts on its hot path; validating 1,000 of them again
        # per batch would cost more than draining them did.
        wire = [
            m.model_dump(mode="json", exclude_none=True) if isinstance(m, WireModel) else m
            for m in messages
        ]
        policy = None if retry else _SINGLE_TRY
        path = _task_path(task_id, "messages")
        await self._call("messages", "POST", path, _ignore, {"messages": wire}, policy)

    async def task_status(self, task_id: str) -> str:
        """The task's status on the server; `TaskGoneError` if the server forgot it."""
        answer = await self._call(
            "status", "GET", _task_path(task_id, "status"), _model(TaskStatusResponse)
        )
        return answer.status

    async def report_usage(
        self, task_id: str, usage: Sequence[UsageEntry], *, retry: bool = True
    ) -> None:
        """Report the task's token usage per model (`retry=False`: one try, for the outbox)."""
        body = UsageBody(usage=list(usage))
        policy = None if retry else _SINGLE_TRY
        await self._call("usage", "POST", _task_path(task_id, "usage"), _ignore, body, policy)

    async def complete(
        self, task_id: str, output: str, session_id: str, work_dir: str, *, retry: bool = True
    ) -> None:
        """Report the task completed (terminal: long retries, shielded from cancellation).

        `retry=False` tries once (the outbox re-sends on its own schedule).
        """
        body = CompleteBody(output=output, session_id=session_id, work_dir=work_dir)
        await self._report("complete", _task_path(task_id, "complete"), body, retry)

    async def fail(
        self,
        task_id: str,
        error: str,
        failure_reason: str,
        session_id: str,
        work_dir: str,
        *,
        retry: bool = True,
    ) -> None:
        """Report the task failed (terminal: long retries, shielded from cancellation)."""
        body = FailBody(
            error=error, failure_reason=failure_reason, session_id=session_id, work_dir=work_dir
        )
        await self._report("fail", _task_path(task_id, "fail"), body, retry)

    async def cancel_ack(self, task_id: str, *, retry: bool = True) -> None:
        """Acknowledge a server-side cancel (terminal: long retries, shielded)."""
        await self._report("cancel_ack", _task_path(task_id, "cancel-ack"), None, retry)

    async def deregister(self, runtime_ids: Sequence[str]) -> None:
        """Tell the server these runtimes are going away (at shutdown)."""
        body = DeregisterRequest(runtime_ids=list(runtime_ids))
        await self._call("deregister", "POST", "/api/daemon/deregister", _ignore, body)

    def report_deadline(self, *, retry: bool = True) -> float:
        """How long one terminal report may take in all: its policy's waits plus one request."""
        waits = self._report_policy.budget() if retry else 0.0
        deadline = waits + self._request_budget()
        return deadline if self._report_cap is None else min(deadline, self._report_cap)

    def cut_reports(self, within: float) -> None:
        """The daemon is stopping: terminal reports end within `within` seconds from now, and
        later ones take at most that long each; what does not get through goes to the outbox.
        """
        self._report_cap = within if self._report_cap is None else min(self._report_cap, within)
        cutoff = anyio.current_time() + within
        for scope in self._reports:
            scope.deadline = min(scope.deadline, cutoff)

    async def _report(self, endpoint: str, path: str, body: WireModel | None, retry: bool) -> None:
        policy = self._report_policy if retry else _SINGLE_TRY
        deadline = self.report_deadline(retry=retry)
        payload: WireModel | dict[str, Any] = {} if body is None else body
        with anyio.move_on_after(deadline, shield=True) as scope:
            self._reports.add(scope)
            try:
                await self._call(endpoint, "POST", path, _ignore, payload, policy)
                return
            finally:
                self._reports.discard(scope)
        if self.circuit is not None:
            self.circuit.record_failure()
        raise TransientServerError(endpoint, f"gave up at the report deadline ({deadline:.0f}s)")

    def _request_budget(self) -> float:
        timeout = self._http.timeout
        parts = (timeout.connect, timeout.write, timeout.read)
        return sum(READ_TIMEOUT if part is None else part for part in parts)

    async def _reject(self, task_id: str, reason: str) -> None:
        body = FailBody(
            error=f"the daemon could not read this task: {reason}", failure_reason="invalid_task"
        )
        try:
            await self._call("fail", "POST", _task_path(task_id, "fail"), _ignore, body)
        except ServerError as exc:
            log.error("claim: could not fail invalid task %s: %s", task_id, exc)

    async def _call(
        self,
        endpoint: str,
        method: str,
        path: str,
        parse: Callable[[httpx.Response], T],
        body: WireModel | dict[str, Any] | None = None,
        policy: RetryPolicy | None = None,
    ) -> T:
        policy = policy or self._policy
        payload = (
            body.model_dump(mode="json", exclude_none=True) if isinstance(body, WireModel) else body
        )
        content = None if payload is None else to_json(payload)
        headers = None if payload is None else _JSON_HEADERS
        failures = 0
        while True:
            started = time.perf_counter()
            throttled, retry_after = False, None
            try:
                # pydantic-core serialises a 1,000-message batch several times faster than json.
                response = await self._http.request(method, path, content=content, headers=headers)
            except httpx.UnsupportedProtocol as exc:  # a bad server URL: no retry helps
                self._observe(endpoint, "permanent", started, reached=False)
                raise PermanentServerError(endpoint, describe_transport_error(exc)) from exc
            except httpx.RequestError as exc:
                self._observe(endpoint, "transient", started, reached=False)
                error: ServerError = TransientServerError(endpoint, describe_transport_error(exc))
            else:
                if response.is_success:
                    try:
                        result = parse(response)
                    except ValueError as exc:
                        self._observe(endpoint, "malformed", started, reached=True)
                        # `from None`: the validation error quotes the body (maybe a token).
                        raise MalformedResponseError(
                            endpoint, describe_parse_error(exc), response.status_code
                        ) from None
                    self._observe(endpoint, "ok", started, reached=True)
                    return result
                error = error_for_response(endpoint, response)
                if not isinstance(error, TransientServerError):
                    self._observe(endpoint, "permanent", started, reached=True)
                    raise error
                self._observe(endpoint, "transient", started, reached=False)
                throttled = response.status_code == 429
                retry_after = response.headers.get("Retry-After")
            failures += 1
            delay = policy.delay(failures, throttled=throttled, retry_after=retry_after)
            if delay is None:
                if self.circuit is not None:
                    self.circuit.record_failure()
                raise error
            log.warning(
                "server %s attempt %d failed (%s); retrying in %.1fs",
                endpoint,
                failures,
                error,
                delay,
            )
            if self._metrics is not None:
                self._metrics.server_retries.labels(endpoint).inc()
            await policy.sleep(delay)

    def _observe(self, endpoint: str, outcome: str, started: float, *, reached: bool) -> None:
        if reached and self.circuit is not None:
            self.circuit.record_success()
        if self._metrics is not None:
            self._metrics.server_requests.labels(endpoint, outcome).inc()
            self._metrics.server_request_duration.labels(endpoint).observe(
                time.perf_counter() - started
            )


def _parse_claim(response: httpx.Response) -> tuple[list[Task], list[tuple[str, str]]]:
    data = response.json()
    if not isinstance(data, dict) or "tasks" not in data:
        raise ValueError("a claim answer is an object with `tasks`")
    raw = data["tasks"]
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise ValueError("`tasks` is not a list")
    tasks: list[Task] = []
    rejected: list[tuple[str, str]] = []
    for item in raw:
        try:
            tasks.append(Task.model_validate(item))
        except ValidationError as exc:
            task_id = item.get("id") if isinstance(item, dict) else None
            ident = str(task_id) if isinstance(task_id, str | int) else ""
            rejected.append((ident, describe_parse_error(exc)))
    return tasks, rejected
