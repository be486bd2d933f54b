"""The daemon's client of the server protocol (PROTOCOL.md), over an injected httpx client.

Every call retries transient failures per its `RetryPolicy`, maps the rest onto
daemon/errors.py, records its outcome on the circuit breaker and in the metrics, and turns a 2xx
body that does not parse into `MalformedResponseError` for that one call. Terminal reports use
the longer report policy inside a shielded cancel scope with its own deadline, so cancelling the
caller cannot cut a task's result short; only the shutdown budget (a stopping daemon) shortens
them, and what then does not get through is kept in the outbox.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import httpx
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
    DeregisterRequest,
    HeartbeatRequest,
    RecoverOrphansResponse,
    RegisterRequest,
    RegisterResponse,
    RuntimeInfo,
    Task,
    TaskStatusResponse,
    TerminalReport,
    TranscriptMessage,
    UsageBody,
    UsageEntry,
    WireModel,
    Workspace,
)
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.runtime_models import HeartbeatResponse
from daemon.protocol.wire import (
    DAEMON_ID_HEADER,
    describe_parse_error,
    describe_transport_error,
    error_for_response,
    ignore_body,
    parse_claim,
    parse_model,
    parse_workspaces,
    request_budget,
    task_path,
)
from daemon.protocol.wire import make_http_client as make_http_client
from daemon.shutdown import REPORT_CALL, ShutdownBudget

log = logging.getLogger(__name__)

T = TypeVar("T")
Parse = Callable[[httpx.Response], T]

_SINGLE_TRY = RetryPolicy.never()
_JSON_HEADERS = {"Content-Type": "application/json"}


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
        budget: ShutdownBudget | None = None,
    ) -> None:
        self._http = http
        self._metrics = metrics
        self.circuit = circuit
        self._policy = policy or RetryPolicy()
        self._report_policy = report_policy or RetryPolicy.for_reports()
        self.budget = budget or ShutdownBudget()

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
            "register", "POST", "/api/daemon/register", parse_model(RegisterResponse), body
        )

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
        for task_id, reason in rejected:
            log.error("claim: task %s does not fit the protocol: %s", task_id, reason)
            if task_id:
                await self._reject(task_id, reason)
        return tasks

    async def start_task(self, task_id: str) -> None:
        """Tell the server the task's work directory exists and the agent is starting."""
        await self._call("start", "POST", task_path(task_id, "start"), ignore_body, {})

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
        path = task_path(task_id, "messages")
        await self._call("messages", "POST", path, ignore_body, {"messages": wire}, policy)

    async def task_status(self, task_id: str) -> str:
        """The task's status on the server; `TaskGoneError` if the server forgot it."""
        path = task_path(task_id, "status")
        return (await self._call("status", "GET", path, parse_model(TaskStatusResponse))).status

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
        path = task_path(task_id, report.endpoint)
        scope = anyio.CancelScope(deadline=anyio.current_time() + deadline, shield=True)
        with scope, self.budget.bounding(scope, REPORT_CALL):
            await self._call(endpoint, "POST", path, ignore_body, report.body(), policy)
            return
        if self.circuit is not None:
            self.circuit.record_failure()
        raise TransientServerError(endpoint, f"gave up at the report deadline ({deadline:.0f}s)")

    async def deregister(self, runtime_ids: Sequence[str]) -> None:
        """Tell the server these runtimes are going away (at shutdown)."""
        body = DeregisterRequest(runtime_ids=list(runtime_ids))
        await self._call("deregister", "POST", "/api/daemon/deregister", ignore_body, body)

    async def post(self, endpoint: str, path: str, body: dict[str, Any], parse: Parse[T]) -> T:
        """One POST tried once, with this client's error mapping and metrics (protocol/ calls)."""
        return await self._call(endpoint, "POST", path, parse, body, _SINGLE_TRY)

    def report_deadline(self, *, retry: bool = True) -> float:
        """How long one terminal report may take in all: its policy's waits plus one request."""
        waits = self._report_policy.budget() if retry else 0.0
        return waits + request_budget(self._http)

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

    async def _call(
        self,
        endpoint: str,
        method: str,
        path: str,
        parse: Parse[T],
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
