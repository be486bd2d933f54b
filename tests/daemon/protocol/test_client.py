"""Tests for the server client: retries, error mapping, parsing, headers, metrics, shielding."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
import respx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from daemon.errors import (
    MalformedResponseError,
    PermanentServerError,
    RuntimeGoneError,
    TaskGoneError,
    TransientServerError,
)
from daemon.ops.metrics import Metrics
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.client import ServerClient, make_http_client
from daemon.protocol.release import cli_version
from daemon.protocol.reports import TerminalReport, TranscriptMessage, UsageEntry
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.runtime_models import RuntimeInfo
from daemon.testing import RecordingSleep

BASE = "http://server.test"
TOKEN = "daemon-secret-token"
VERSION = "9.8.7"
NOW = 1_700_000_000.0


@dataclass
class Harness:
    """A client wired to respx routes, a recording sleep, fresh metrics and a circuit."""

    router: respx.Router
    client: ServerClient
    sleep: RecordingSleep
    metrics: Metrics
    circuit: CircuitBreaker

    def sample(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


def make_harness(
    rng: float = 0.5,
    token: str = TOKEN,
    report_sleep: Callable[[float], Awaitable[None]] | None = None,
) -> Harness:
    router = respx.Router(base_url=BASE, assert_all_mocked=True)
    sleep = RecordingSleep()
    metrics = Metrics()
    circuit = CircuitBreaker(clock=lambda: 0.0, metrics=metrics)
    http = make_http_client(
        BASE, token, VERSION, transport=httpx.MockTransport(router.async_handler)
    )
    client = ServerClient(
        http,
        metrics=metrics,
        circuit=circuit,
        policy=RetryPolicy(sleep=sleep, rng=lambda: rng, wall_clock=lambda: NOW),
        report_policy=RetryPolicy.for_reports(
            sleep=report_sleep or sleep, rng=lambda: rng, wall_clock=lambda: NOW
        ),
    )
    return Harness(router, client, sleep, metrics, circuit)


def complete(output: str, session_id: str = "", work_dir: str = "") -> TerminalReport:
    return TerminalReport(kind="complete", output=output, session_id=session_id, work_dir=work_dir)


def fail(error: str, reason: str, session_id: str, work_dir: str) -> TerminalReport:
    return TerminalReport(
        kind="fail", error=error, failure_reason=reason, session_id=session_id, work_dir=work_dir
    )


def task_json(task_id: str = "t1", **extra: Any) -> dict[str, Any]:
    return {"id": task_id, "runtime_id": "rt1", "auth_token": "task-token", **extra}


def within_jitter(delays: list[float], bases: list[float]) -> bool:
    return len(delays) == len(bases) and all(
        0.8 * b <= d <= 1.2 * b for d, b in zip(delays, bases, strict=True)
    )


# --- retries -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_5xx_then_success_is_retried() -> None:
    """Two 5xx answers, then 200: the call succeeds after waits of 1s and 2s."""
    h = make_harness()
    route = h.router.post("/api/daemon/heartbeat").mock(
        side_effect=[httpx.Response(502), httpx.Response(503), httpx.Response(200, json={})]
    )
    await h.client.heartbeat("rt1")
    assert route.call_count == 3
    assert h.sleep.delays == [1.0, 2.0]


@pytest.mark.anyio
@pytest.mark.parametrize("rng", [0.0, 0.999_999])
async def test_5xx_forever_gives_up_after_three_retries(rng: float) -> None:
    """A server that keeps failing gets 4 tries in all, waits 1, 2, 4 (±20%), then an error."""
    h = make_harness(rng)
    route = h.router.post("/api/daemon/heartbeat").mock(return_value=httpx.Response(500))
    with pytest.raises(TransientServerError) as info:
        await h.client.heartbeat("rt1")
    assert route.call_count == 4
    assert within_jitter(h.sleep.delays, [1.0, 2.0, 4.0])
    assert info.value.status == 500


@pytest.mark.anyio
async def test_408_is_retried() -> None:
    """A 408 request timeout is transient."""
    h = make_harness()
    route = h.router.get("/api/daemon/workspaces").mock(
        side_effect=[httpx.Response(408), httpx.Response(200, json=[{"id": "w"}])]
    )
    assert [w.id for w in await h.client.workspaces()] == ["w"]
    assert route.call_count == 2


@pytest.mark.anyio
async def test_connect_error_is_retried() -> None:
    """A transport error (connection refused) is retried like a 5xx."""
    h = make_harness()
    route = h.router.post("/api/daemon/heartbeat").mock(
        side_effect=[httpx.ConnectError("refused"), httpx.Response(200, json={"status": "ok"})]
    )
    assert (await h.client.heartbeat("rt1")).status == "ok"
    assert route.call_count == 2
    assert h.sleep.delays == [1.0]


@pytest.mark.anyio
async def test_429_honours_retry_after_seconds() -> None:
    """A 429 with `Retry-After: 7` waits 7s (never less), then retries."""
    h = make_harness(rng=0.0)
    route = h.router.post("/api/daemon/tasks/claim").mock(
        side_effect=[
            httpx.Response(429, headers={"Retry-After": "7"}),
            httpx.Response(200, json={"tasks": []}),
        ]
    )
    assert await h.client.claim("d1", ["rt1"], 2) == []
    assert route.call_count == 2
    assert h.sleep.delays == [7.0]


@pytest.mark.anyio
async def test_429_honours_retry_after_http_date() -> None:
    """A 429 whose Retry-After is an HTTP-date waits until that date."""
    h = make_harness(rng=0.0)
    when = formatdate(NOW + 90, usegmt=True)
    h.router.post("/api/daemon/tasks/claim").mock(
        side_effect=[
            httpx.Response(429, headers={"Retry-After": when}),
            httpx.Response(200, json={"tasks": []}),
        ]
    )
    await h.client.claim("d1", ["rt1"], 2)
    assert h.sleep.delays == [pytest.approx(90.0)]


@pytest.mark.anyio
async def test_429_retry_after_is_capped_and_five_tries_in_all() -> None:
    """A server that keeps answering 429 with an hour's Retry-After: 5 tries, 300s waits."""
    h = make_harness(rng=0.999_999)
    route = h.router.post("/api/daemon/tasks/claim").mock(
        return_value=httpx.Response(429, headers={"Retry-After": "3600"})
    )
    with pytest.raises(TransientServerError) as info:
        await h.client.claim("d1", ["rt1"], 2)
    assert route.call_count == 5
    assert h.sleep.delays == [300.0] * 4
    assert info.value.status == 429


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
async def test_permanent_4xx_is_not_retried(status: int) -> None:
    """400/401/403/404/422 and any other 4xx: exactly one request, no wait, a permanent error."""
    h = make_harness()
    route = h.router.post("/api/daemon/heartbeat").mock(
        return_value=httpx.Response(status, json={"error": "nope"})
    )
    with pytest.raises(PermanentServerError) as info:
        await h.client.heartbeat("rt1")
    assert route.call_count == 1
    assert h.sleep.delays == []
    assert info.value.status == status
    assert "nope" in str(info.value)


@pytest.mark.anyio
async def test_retries_are_logged_at_warning_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each retry logs endpoint, attempt and delay at WARNING; the token never appears."""
    h = make_harness()
    h.router.post("/api/daemon/heartbeat").mock(
        side_effect=[httpx.Response(503), httpx.Response(200, json={})]
    )
    with caplog.at_level(logging.DEBUG):
        await h.client.heartbeat("rt1")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].args is not None and warnings[0].args[0] == "heartbeat"
    text = warnings[0].getMessage()
    assert "attempt 1" in text and "1.0s" in text
    assert TOKEN not in caplog.text


# --- terminal reports ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_terminal_report_uses_the_long_policy() -> None:
    """`complete` against a failing server waits 4, 8, 16, 32, 64s: 6 tries in all."""
    h = make_harness()
    route = h.router.post("/api/daemon/tasks/t1/complete").mock(return_value=httpx.Response(503))
    with pytest.raises(TransientServerError):
        await h.client.send_report("t1", complete("done", "s1", "/w"))
    assert route.call_count == 6
    assert h.sleep.delays == [4.0, 8.0, 16.0, 32.0, 64.0]


@pytest.mark.anyio
async def test_terminal_report_survives_cancelling_the_caller() -> None:
    """Cancelling the caller's scope mid-retry does not cut `fail` short: it still lands."""
    outer = anyio.CancelScope()
    waits: list[float] = []

    async def sleep_and_cancel(delay: float) -> None:
        waits.append(delay)
        outer.cancel()  # e.g. the daemon shutting down while the report is being retried
        await anyio.lowlevel.checkpoint()

    h = make_harness(report_sleep=sleep_and_cancel)
    route = h.router.post("/api/daemon/tasks/t1/fail").mock(
        side_effect=[httpx.Response(503), httpx.Response(503), httpx.Response(200, json={})]
    )
    with outer:
        await h.client.send_report("t1", fail("boom", "agent_error", "s1", "/w"))
        await anyio.lowlevel.checkpoint()
        pytest.fail("the caller's scope should have been cancelled")  # pragma: no cover
    assert outer.cancelled_caught
    assert route.call_count == 3
    assert waits == [4.0, 8.0]
    assert json.loads(route.calls.last.request.content) == {
        "error": "boom",
        "failure_reason": "agent_error",
        "session_id": "s1",
        "work_dir": "/w",
    }


@pytest.mark.anyio
async def test_terminal_report_gives_up_at_its_deadline() -> None:
    """A report is bounded by its own deadline even when Retry-After asks for longer."""
    router = respx.Router(base_url=BASE)
    route = router.post("/api/daemon/tasks/t1/cancel-ack").mock(
        return_value=httpx.Response(429, headers={"Retry-After": "300"})
    )
    http = httpx.AsyncClient(
        base_url=BASE, timeout=0.05, transport=httpx.MockTransport(router.async_handler)
    )
    client = ServerClient(http, report_policy=RetryPolicy((0.01, 0.01)))
    assert client.report_deadline() == pytest.approx(0.02 * 1.2 + 0.15)
    with anyio.fail_after(10):
        with pytest.raises(TransientServerError, match="deadline"):
            await client.send_report("t1", TerminalReport(kind="cancel_ack"))
    assert route.call_count == 1


@pytest.mark.anyio
async def test_report_without_retry_tries_once() -> None:
    """`retry=False` (the outbox's flush) makes exactly one request."""
    h = make_harness()
    route = h.router.post("/api/daemon/tasks/t1/complete").mock(return_value=httpx.Response(503))
    with pytest.raises(TransientServerError):
        await h.client.send_report("t1", complete("out"), retry=False)
    assert route.call_count == 1
    assert h.sleep.delays == []


# --- error mapping and parsing -------------------------------------------------------------


@pytest.mark.anyio
async def test_task_not_found_is_task_gone() -> None:
    """404 "task not found" raises TaskGoneError so the runner can stop the agent."""
    h = make_harness()
    h.router.get("/api/daemon/tasks/t1/status").mock(
        return_value=httpx.Response(404, json={"error": "task not found"})
    )
    with pytest.raises(TaskGoneError):
        await h.client.task_status("t1")


@pytest.mark.anyio
async def test_runtime_not_found_is_runtime_gone() -> None:
    """404 "runtime not found" raises RuntimeGoneError so the worker registers again."""
    h = make_harness()
    h.router.post("/api/daemon/heartbeat").mock(
        return_value=httpx.Response(404, json={"error": "Runtime not found"})
    )
    with pytest.raises(RuntimeGoneError):
        await h.client.heartbeat("rt1")


@pytest.mark.anyio
async def test_other_404_is_plain_permanent() -> None:
    """A 404 that names neither a task nor a runtime (a wrong URL) is only permanent."""
    h = make_harness()
    h.router.get("/api/daemon/workspaces").mock(
        return_value=httpx.Response(404, text="<html>Not Found</html>")
    )
    with pytest.raises(PermanentServerError) as info:
        await h.client.workspaces()
    assert not isinstance(info.value, TaskGoneError | RuntimeGoneError)
    assert "Not Found" in str(info.value)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, json={"state": "running"}),
        httpx.Response(200, text="<html>ok</html>"),
        httpx.Response(200, json=["running"]),
        httpx.Response(200, content=b""),
    ],
)
async def test_malformed_2xx_is_malformed_response_error(response: httpx.Response) -> None:
    """A 2xx whose body does not fit raises MalformedResponseError, once, counted."""
    h = make_harness()
    route = h.router.get("/api/daemon/tasks/t1/status").mock(return_value=response)
    with pytest.raises(MalformedResponseError):
        await h.client.task_status("t1")
    assert route.call_count == 1
    assert (
        h.sample("agent_daemon_server_requests_total", endpoint="status", outcome="malformed") == 1
    )


@pytest.mark.anyio
async def test_malformed_register_does_not_quote_the_body() -> None:
    """The error names the problem field, not the body's values."""
    h = make_harness()
    h.router.post("/api/daemon/register").mock(
        return_value=httpx.Response(200, json={"runtimes": [{"name": "secret-value"}]})
    )
    with pytest.raises(MalformedResponseError) as info:
        await h.client.register("ws", "d1", "box", "1.0", [RuntimeInfo(name="c", type="claude")])
    assert "runtimes.0.id" in str(info.value)
    assert "secret-value" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.anyio
async def test_unsupported_scheme_is_permanent() -> None:
    """A server URL with a scheme httpx cannot speak is not retried."""
    sleep = RecordingSleep()
    client = ServerClient(
        httpx.AsyncClient(base_url="ftp://server.test"), policy=RetryPolicy(sleep=sleep)
    )
    with pytest.raises(PermanentServerError):
        await client.heartbeat("rt1")
    assert sleep.delays == []


# --- each endpoint -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_register_sends_the_protocol_body() -> None:
    """Register posts workspace, daemon, device, version and runtimes; parses the runtimes."""
    h = make_harness()
    route = h.router.post("/api/daemon/register").mock(
        return_value=httpx.Response(
            200,
            json={
                "runtimes": [{"id": "rt1", "name": "claude", "provider": "claude", "x": 1}],
                "workspace": {"id": "ws"},
            },
        )
    )
    runtimes = [RuntimeInfo(name="Claude", type="claude", version="2.0")]
    answer = await h.client.register("ws", "d1", "box", "0.1.0", runtimes, ["box.local"])
    assert [r.id for r in answer.runtimes] == ["rt1"]
    assert json.loads(route.calls.last.request.content) == {
        "workspace_id": "ws",
        "daemon_id": "d1",
        "device_name": "box",
        "cli_version": "0.1.0",
        "runtimes": [{"name": "Claude", "type": "claude", "version": "2.0", "status": "online"}],
        "legacy_daemon_ids": ["box.local"],
        "failed_profiles": [],
    }


@pytest.mark.anyio
async def test_claim_sends_body_and_returns_tasks() -> None:
    """Claim posts daemon id, runtime ids and free slots; unknown task fields are ignored."""
    h = make_harness()
    route = h.router.post("/api/daemon/tasks/claim").mock(
        return_value=httpx.Response(
            200, json={"tasks": [task_json("t1", extra="x"), task_json("t2")], "more": True}
        )
    )
    tasks = await h.client.claim("d1", ["rt1", "rt2"], 3)
    assert [t.id for t in tasks] == ["t1", "t2"]
    assert tasks[0].auth_token == "task-token"
    assert json.loads(route.calls.last.request.content) == {
        "daemon_id": "d1",
        "runtime_ids": ["rt1", "rt2"],
        "max_tasks": 3,
    }


@pytest.mark.anyio
async def test_claim_without_tasks_key_is_malformed() -> None:
    """A claim answer that is not `{"tasks": [...]}` is malformed, not an empty claim."""
    h = make_harness()
    h.router.post("/api/daemon/tasks/claim").mock(
        return_value=httpx.Response(200, json={"task": task_json()})
    )
    with pytest.raises(MalformedResponseError):
        await h.client.claim("d1", ["rt1"], 1)


@pytest.mark.anyio
async def test_claim_keeps_good_tasks_and_fails_a_bad_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One unreadable task in a claim is failed on the server; the others are returned."""
    h = make_harness()
    bad = {"id": "t2", "agent": "not an object", "auth_token": "bad-task-token"}
    h.router.post("/api/daemon/tasks/claim").mock(
        return_value=httpx.Response(200, json={"tasks": [task_json("t1"), bad, "junk"]})
    )
    fail = h.router.post("/api/daemon/tasks/t2/fail").mock(return_value=httpx.Response(200))
    with caplog.at_level(logging.INFO):
        tasks = await h.client.claim("d1", ["rt1"], 3)
    assert [t.id for t in tasks] == ["t1"]
    assert fail.call_count == 1
    body = json.loads(fail.calls.last.request.content)
    assert body["failure_reason"] == "invalid_task"
    assert "agent" in body["error"]
    assert "bad-task-token" not in caplog.text + body["error"]


@pytest.mark.anyio
async def test_per_task_calls_hit_their_paths() -> None:
    """start, messages, usage and cancel-ack post the protocol bodies to the task's path."""
    h = make_harness()
    start = h.router.post("/api/daemon/tasks/t1/start").mock(return_value=httpx.Response(204))
    messages = h.router.post("/api/daemon/tasks/t1/messages").mock(
        return_value=httpx.Response(200, json={"ok": True})
    )
    usage = h.router.post("/api/daemon/tasks/t1/usage").mock(return_value=httpx.Response(200))
    ack = h.router.post("/api/daemon/tasks/t1/cancel-ack").mock(return_value=httpx.Response(200))
    await h.client.start_task("t1")
    await h.client.send_messages(
        "t1",
        [
            TranscriptMessage(seq=1, type="tool_use", tool="Bash", input={"command": "ls"}),
            TranscriptMessage(seq=2, type="tool_result", tool="Bash", output="a b"),
        ],
    )
    await h.client.report_usage("t1", [UsageEntry(provider="anthropic", model="m", input_tokens=5)])
    await h.client.send_report("t1", TerminalReport(kind="cancel_ack"))
    assert json.loads(start.calls.last.request.content) == {}
    sent = json.loads(messages.calls.last.request.content)["messages"]
    assert sent[0] == {
        "seq": 1,
        "type": "tool_use",
        "tool": "Bash",
        "content": "",
        "input": {"command": "ls"},
        "output": "",
    }
    assert "input" not in sent[1]
    assert json.loads(usage.calls.last.request.content)["usage"][0]["input_tokens"] == 5
    assert json.loads(ack.calls.last.request.content) == {}


@pytest.mark.anyio
async def test_status_recover_and_deregister() -> None:
    """Status returns the string; recover-orphans returns counts; deregister posts the ids."""
    h = make_harness()
    h.router.get("/api/daemon/tasks/t1/status").mock(
        return_value=httpx.Response(200, json={"status": "cancelled", "id": "t1"})
    )
    h.router.post("/api/daemon/runtimes/rt1/recover-orphans").mock(
        return_value=httpx.Response(200, json={"orphaned": 2, "retried": 1})
    )
    dereg = h.router.post("/api/daemon/deregister").mock(return_value=httpx.Response(200))
    assert await h.client.task_status("t1") == "cancelled"
    counts = await h.client.recover_orphans("rt1")
    assert (counts.orphaned, counts.retried) == (2, 1)
    await h.client.deregister(["rt1", "rt2"])
    assert json.loads(dereg.calls.last.request.content) == {"runtime_ids": ["rt1", "rt2"]}


@pytest.mark.anyio
async def test_task_id_cannot_escape_its_path() -> None:
    """A task id with a slash is quoted into one path segment."""
    h = make_harness()
    route = h.router.post("/api/daemon/tasks/a%2F..%2Fb/start").mock(
        return_value=httpx.Response(200)
    )
    await h.client.start_task("a/../b")
    assert route.call_count == 1


# --- headers, metrics, circuit -------------------------------------------------------------


@pytest.mark.anyio
async def test_headers_are_on_every_request() -> None:
    """Authorization, platform, version, OS and capabilities headers ride on every call."""
    h = make_harness()
    h.router.get("/api/daemon/workspaces").mock(return_value=httpx.Response(200, json=[]))
    h.router.post("/api/daemon/heartbeat").mock(return_value=httpx.Response(200, json={}))
    h.router.post("/api/daemon/tasks/t1/complete").mock(return_value=httpx.Response(200))
    await h.client.workspaces()
    await h.client.heartbeat("rt1")
    await h.client.send_report("t1", complete("ok"))
    assert len(h.router.calls) == 3
    for call in h.router.calls:
        headers = call.request.headers
        assert headers["Authorization"] == f"Bearer {TOKEN}"
        assert headers["X-Client-Platform"] == "daemon"
        assert headers["X-Client-Version"] == cli_version(VERSION)
        assert headers["User-Agent"] == f"agent-daemon/{VERSION}"
        assert headers["X-Client-OS"] in ("linux", "macos", "windows")
        capabilities = "skill-bundles-v1,coalesced-comments-v1,rpc-v1,local-worktree-v1"
        assert headers["X-Client-Capabilities"] == capabilities


@pytest.mark.anyio
async def test_no_token_sends_no_authorization() -> None:
    """Without a token (embedded server on loopback) no empty Bearer header is sent."""
    h = make_harness(token="")
    h.router.post("/api/daemon/heartbeat").mock(return_value=httpx.Response(200, json={}))
    await h.client.heartbeat("rt1")
    assert "Authorization" not in h.router.calls.last.request.headers


def test_http_client_timeouts() -> None:
    """The HTTP client connects within 10s, reads within 30s, and keeps a base path."""
    http = make_http_client("http://x/prefix/", TOKEN, VERSION)
    assert (http.timeout.connect, http.timeout.read) == (10.0, 30.0)
    url = http.build_request("GET", "/api/daemon/workspaces").url
    assert str(url) == "http://x/prefix/api/daemon/workspaces"


@pytest.mark.anyio
async def test_metrics_count_requests_retries_and_latency() -> None:
    """Each try is counted by endpoint and outcome, retries by endpoint; no task id in labels."""
    h = make_harness()
    h.router.post("/api/daemon/tasks/task-abc123/messages").mock(
        side_effect=[httpx.Response(500), httpx.Response(200)]
    )
    h.router.post("/api/daemon/tasks/task-abc123/start").mock(
        return_value=httpx.Response(422, json={"error": "bad"})
    )
    h.client.dedupes = True  # a server that stores each seq once: the 500 is retried
    await h.client.send_messages("task-abc123", [TranscriptMessage(seq=1, type="text")])
    with pytest.raises(PermanentServerError):
        await h.client.start_task("task-abc123")
    count = h.sample
    assert count("agent_daemon_server_requests_total", endpoint="messages", outcome="ok") == 1
    assert (
        count("agent_daemon_server_requests_total", endpoint="messages", outcome="transient") == 1
    )
    assert count("agent_daemon_server_requests_total", endpoint="start", outcome="permanent") == 1
    assert count("agent_daemon_server_retries_total", endpoint="messages") == 1
    assert count("agent_daemon_server_request_duration_seconds_count", endpoint="messages") == 2
    assert b"task-abc123" not in h.metrics.exposition()


@pytest.mark.anyio
async def test_three_failed_calls_open_the_circuit() -> None:
    """Three calls that exhaust their retries open the circuit; an answer closes it again."""
    h = make_harness()
    route = h.router.post("/api/daemon/heartbeat").mock(return_value=httpx.Response(503))
    for _ in range(3):
        with pytest.raises(TransientServerError):
            await h.client.heartbeat("rt1")
    assert h.circuit.state == "open"
    assert not h.circuit.allow()
    route.mock(return_value=httpx.Response(401, json={"error": "who are you"}))
    with pytest.raises(PermanentServerError):
        await h.client.heartbeat("rt1")
    assert h.circuit.state == "closed"


@pytest.mark.anyio
async def test_one_retried_success_does_not_count_as_failure() -> None:
    """Transient failures that a retry recovers leave the circuit's count at zero."""
    h = make_harness()
    h.router.post("/api/daemon/heartbeat").mock(
        side_effect=[httpx.Response(503), httpx.Response(200, json={})] * 3
    )
    for _ in range(3):
        await h.client.heartbeat("rt1")
    assert h.circuit.failures == 0
    assert h.circuit.state == "closed"


# --- a real HTTP server on loopback --------------------------------------------------------


@asynccontextmanager
async def loopback_server(app: Starlette) -> AsyncIterator[str]:
    """Serve `app` with uvicorn on an ephemeral loopback port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


@pytest.mark.anyio
async def test_against_a_real_server_on_loopback() -> None:
    """Over real HTTP: headers arrive, a 503 is retried, the claimed task parses."""
    seen: list[dict[str, str]] = []

    async def claim(request: Request) -> JSONResponse:
        seen.append(dict(request.headers))
        if len(seen) == 1:
            return JSONResponse({"error": "warming up"}, status_code=503)
        body = await request.json()
        return JSONResponse({"tasks": [task_json("t9", runtime_id=body["runtime_ids"][0])]})

    app = Starlette(routes=[Route("/api/daemon/tasks/claim", claim, methods=["POST"])])
    sleep = RecordingSleep()
    with anyio.fail_after(20):
        async with loopback_server(app) as url, make_http_client(url, TOKEN, VERSION) as http:
            client = ServerClient(http, policy=RetryPolicy(sleep=sleep, rng=lambda: 0.5))
            tasks = await client.claim("d1", ["rt7"], 1)
    assert [(t.id, t.runtime_id) for t in tasks] == [("t9", "rt7")]
    assert sleep.delays == [1.0]
    assert len(seen) == 2
    assert seen[1]["authorization"] == f"Bearer {TOKEN}"
    assert seen[1]["x-client-platform"] == "daemon"
    assert seen[1]["x-client-version"] == cli_version(VERSION)


@pytest.mark.anyio
async def test_connection_refused_on_loopback_is_transient() -> None:
    """A closed loopback port refuses the connection: retried, then TransientServerError."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleep = RecordingSleep()
    async with make_http_client(f"http://127.0.0.1:{port}", TOKEN, VERSION) as http:
        client = ServerClient(http, policy=RetryPolicy(sleep=sleep, rng=lambda: 0.5))
        with pytest.raises(TransientServerError, match="ConnectError"):
            await client.heartbeat("rt1")
    assert sleep.delays == [1.0, 2.0, 4.0]


@pytest.mark.anyio
async def test_plugin_calls_carry_the_tasks_daemon_token_not_the_daemons() -> None:
    """A hook call and a credential ask go with the claim's daemon token (the daemon's own when
    the claim has none); a plugin's contribution asks `plugin-mcp/`, any other `remote-mcp/`;
    a failed hook is an answer, not an error; a credential with a line break is refused."""
    # The id's colons stay as they are (Go's `url.PathEscape`): the router reads the raw path.
    h = make_harness()
    hook = h.router.post("/api/daemon/tasks/t1/plugin-hooks").mock(
        side_effect=[
            httpx.Response(200, json={"status": "ok", "output": {"sent": True}}),
            httpx.Response(200, json={"status": "failed", "error": "endpoint down"}),
        ]
    )
    plugin = h.router.get("/api/daemon/tasks/t1/plugin-mcp/plugin:i:k/credential").mock(
        return_value=httpx.Response(200, json={"credential_header": "X-Key", "credential": "s"})
    )
    remote = h.router.get("/api/daemon/tasks/t1/remote-mcp/c-1/credential").mock(
        return_value=httpx.Response(200, json={"credential_header": "X-Key", "credential": "a\nb"})
    )
    ok = await h.client.invoke_plugin_hook("mdt_task", "t1", "inst", "notify", {"m": 1})
    failed = await h.client.invoke_plugin_hook("", "t1", "inst", "notify", None)
    header = await h.client.remote_mcp_credential("mdt_task", "t1", "plugin:i:k")
    with pytest.raises(MalformedResponseError):
        await h.client.remote_mcp_credential("mdt_task", "t1", "c-1")
    first, second = (call.request for call in hook.calls)
    assert (ok.ok, ok.text) == (True, '{"sent":true}')
    assert (failed.ok, failed.text) == (False, "endpoint down")
    assert first.headers["authorization"] == "Bearer mdt_task"
    assert second.headers["authorization"] == f"Bearer {TOKEN}"
    assert json.loads(first.content) == {
        "installation_id": "inst",
        "hook_key": "notify",
        "input": {"m": 1},
    }
    assert "input" not in json.loads(second.content)
    assert header == {"X-Key": "s"}
    assert plugin.calls.last.request.headers["authorization"] == "Bearer mdt_task"
    assert remote.called
