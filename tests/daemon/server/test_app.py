"""The reference server's HTTP API, over a real uvicorn server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.server.app import create_app
from daemon.server.serve import running_server
from daemon.server.store import Store
from tests.daemon.server.helpers import claim_http, register_http
from tests.helpers import TOKEN, embedded_server, server_client

AUTH = {"Authorization": f"Bearer {TOKEN}"}

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(db_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with embedded_server(db_path) as url, server_client(url, daemon_id="d1") as http:
        yield http


async def _create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await client.post("/api/tasks", json={"prompt": "fix the build", **body})
    assert answer.status_code == 201, answer.text
    task: dict[str, Any] = answer.json()
    return task


async def _claimed(client: httpx.AsyncClient) -> tuple[dict[str, Any], str]:
    """A queued task claimed by daemon d1 through its claude runtime; (task, runtime id)."""
    await _create(client)
    runtime = (await register_http(client))["claude"]
    [task] = await claim_http(client, "d1", [runtime], 1)
    return task, runtime


@pytest.fixture
async def asgi_client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    """The same app in-process, for input-validation cases that need no socket."""
    transport = httpx.ASGITransport(app=create_app(store, TOKEN))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1", headers=AUTH
    ) as http:
        yield http


def _task_url(task_id: str, action: str) -> str:
    return f"/api/daemon/tasks/{task_id}/{action}"


async def test_full_lifecycle(client: httpx.AsyncClient) -> None:
    """Create, claim, start, stream messages, complete: the task shows output and transcript."""
    created = await _create(client, backend="claude")
    assert created["status"] == "queued"
    workspaces = (await client.get("/api/daemon/workspaces")).json()
    assert workspaces == [{"id": "default", "name": "Default"}]
    runtime = (await register_http(client))["claude"]
    recovered = await client.post(f"/api/daemon/runtimes/{runtime}/recover-orphans", json={})
    assert recovered.json() == {"orphaned": 0, "retried": 0}
    assert (await client.post("/api/daemon/heartbeat", json={"runtime_id": runtime})).is_success

    [task] = await claim_http(client, "d1", [runtime], 5)
    assert task["id"] == created["id"]
    assert task["auth_token"]
    assert (await client.post(_task_url(task["id"], "start"), json={})).json()[
        "status"
    ] == "running"
    messages = [
        {"seq": 2, "type": "tool_use", "tool": "Bash", "content": "", "input": {"command": "make"}},
        {"seq": 1, "type": "text", "content": "Looking at the build."},
        {"seq": 3, "type": "tool_result", "tool": "Bash", "output": "ok"},
    ]
    posted = await client.post(_task_url(task["id"], "messages"), json={"messages": messages})
    assert posted.json()["stored"] == 3
    usage = {"provider": "anthropic", "model": "m", "input_tokens": 10, "output_tokens": 2}
    assert (await client.post(_task_url(task["id"], "usage"), json={"usage": [usage]})).is_success
    assert (await client.get(_task_url(task["id"], "status"))).json()["status"] == "running"
    done = {"output": "Build fixed.", "session_id": "sess-1", "work_dir": "/w/1"}
    assert (await client.post(_task_url(task["id"], "complete"), json=done)).is_success

    shown = (await client.get(f"/api/tasks/{task['id']}")).json()
    assert {k: shown[k] for k in ("status", "output", "session_id", "work_dir", "runtime_id")} == {
        "status": "completed",
        "output": "Build fixed.",
        "session_id": "sess-1",
        "work_dir": "/w/1",
        "runtime_id": runtime,
    }
    assert shown["claimed_by"] == "d1"
    assert shown["created_at"] <= shown["claimed_at"] <= shown["started_at"] <= shown["finished_at"]
    assert "auth_token" not in shown
    transcript = (await client.get(f"/api/tasks/{task['id']}/messages")).json()
    assert [(m["seq"], m["type"]) for m in transcript] == [
        (1, "text"),
        (2, "tool_use"),
        (3, "tool_result"),
    ]
    assert transcript[1]["input"] == {"command": "make"}
    recorded = (await client.get(f"/api/tasks/{task['id']}/usage")).json()
    assert [(u["model"], u["input_tokens"]) for u in recorded] == [("m", 10)]


async def test_duplicate_seq_is_stored_once(client: httpx.AsyncClient) -> None:
    """Re-sending a batch is harmless: each (task, seq) is stored once and no error is raised."""
    task, _ = await _claimed(client)
    batch = {"messages": [{"seq": 1, "type": "text", "content": "a"}]}
    first = await client.post(_task_url(task["id"], "messages"), json=batch)
    again = await client.post(_task_url(task["id"], "messages"), json=batch)
    assert (first.status_code, again.status_code) == (200, 200)
    assert (first.json()["stored"], again.json()["stored"]) == (1, 0)
    assert len((await client.get(f"/api/tasks/{task['id']}/messages")).json()) == 1


async def test_messages_after_seq(client: httpx.AsyncClient) -> None:
    """The transcript endpoint can return only the messages past a given seq."""
    task = await _create(client)
    batch = {"messages": [{"seq": s, "type": "text", "content": str(s)} for s in range(1, 5)]}
    await client.post(_task_url(task["id"], "messages"), json=batch)
    tail = await client.get(f"/api/tasks/{task['id']}/messages", params={"after_seq": 2})
    assert [m["seq"] for m in tail.json()] == [3, 4]


async def test_reports_on_terminal_task_are_noop_2xx(client: httpx.AsyncClient) -> None:
    """Complete and fail on a finished task answer 2xx, change nothing, and are counted."""
    task, _ = await _claimed(client)
    url = _task_url(task["id"], "")
    assert (await client.post(url + "start", json={})).status_code == 200
    assert (await client.post(url + "complete", json={"output": "first"})).status_code == 200
    late_complete = await client.post(url + "complete", json={"output": "second"})
    late_fail = await client.post(url + "fail", json={"error": "x", "failure_reason": "timeout"})
    assert (late_complete.status_code, late_fail.status_code) == (200, 200)
    shown = (await client.get(f"/api/tasks/{task['id']}")).json()
    assert (shown["status"], shown["output"], shown["failure_reason"]) == (
        "completed",
        "first",
        None,
    )
    assert (shown["complete_calls"], shown["fail_calls"]) == (2, 1)


async def test_fail_records_reason(client: httpx.AsyncClient) -> None:
    """A failure report stores the error text and the reason."""
    task, _ = await _claimed(client)
    body = {"error": "idle for 30m", "failure_reason": "idle_watchdog", "session_id": "s"}
    assert (await client.post(_task_url(task["id"], "fail"), json=body)).is_success
    shown = (await client.get(f"/api/tasks/{task['id']}")).json()
    assert (shown["status"], shown["error"], shown["failure_reason"], shown["session_id"]) == (
        "failed",
        "idle for 30m",
        "idle_watchdog",
        "s",
    )


async def test_a_running_task_takes_its_pinned_session(client: httpx.AsyncClient) -> None:
    """`session` stores what it is given on a running task (204), 400 with nothing to store;
    a finished task keeps what its terminal report said."""
    task, _ = await _claimed(client)
    url = _task_url(task["id"], "")
    await client.post(url + "start", json={})
    assert (await client.post(url + "session", json={})).status_code == 400
    pinned = await client.post(url + "session", json={"session_id": "s-1", "work_dir": "/w"})
    assert pinned.status_code == 204
    assert (await client.post(url + "session", json={"work_dir": "/w2"})).status_code == 204
    shown = (await client.get(f"/api/tasks/{task['id']}")).json()
    assert (shown["session_id"], shown["work_dir"]) == ("s-1", "/w2")
    await client.post(url + "complete", json={"output": "ok", "session_id": "s-2"})
    assert (await client.post(url + "session", json={"session_id": "late"})).status_code == 204
    assert (await client.get(f"/api/tasks/{task['id']}")).json()["session_id"] == "s-2"


async def test_status_of_unknown_task_is_404_task_not_found(client: httpx.AsyncClient) -> None:
    """The daemon's 'task is gone' signal: 404 with 'task not found'."""
    answer = await client.get(_task_url("no-such-task", "status"))
    assert answer.status_code == 404
    assert answer.json() == {"error": "task not found"}


async def test_heartbeat_for_unknown_runtime_is_404_runtime_not_found(
    client: httpx.AsyncClient,
) -> None:
    """The daemon's 're-register' signal: 404 with 'runtime not found'."""
    answer = await client.post("/api/daemon/heartbeat", json={"runtime_id": "gone"})
    assert answer.status_code == 404
    assert answer.json() == {"error": "runtime not found"}


async def test_recover_orphans_fails_in_flight_tasks(client: httpx.AsyncClient) -> None:
    """After a daemon restart its runtime's dispatched and running tasks fail as recovered."""
    task, runtime = await _claimed(client)
    await _create(client)
    [running] = await claim_http(client, "d1", [runtime], 1)
    await client.post(_task_url(running["id"], "start"), json={})
    answer = await client.post(f"/api/daemon/runtimes/{runtime}/recover-orphans", json={})
    assert answer.json() == {"orphaned": 2, "retried": 0}
    for task_id in (task["id"], running["id"]):
        shown = (await client.get(f"/api/tasks/{task_id}")).json()
        assert (shown["status"], shown["failure_reason"]) == ("failed", "runtime_recovery")


async def test_cancel_is_seen_by_status_poll_and_acknowledged(client: httpx.AsyncClient) -> None:
    """A cancelled task reports `cancelled` to the daemon, which acknowledges it."""
    task, _ = await _claimed(client)
    await client.post(_task_url(task["id"], "start"), json={})
    cancelled = await client.post(f"/api/tasks/{task['id']}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    assert (await client.get(_task_url(task["id"], "status"))).json()["status"] == "cancelled"
    assert (await client.post(_task_url(task["id"], "cancel-ack"), json={})).is_success
    late = await client.post(_task_url(task["id"], "fail"), json={"failure_reason": "cancelled"})
    assert late.is_success
    shown = (await client.get(f"/api/tasks/{task['id']}")).json()
    assert (shown["status"], shown["cancel_acked"]) == ("cancelled", True)


async def test_progress_is_taken_for_a_claimed_task(client: httpx.AsyncClient) -> None:
    """Multica's progress route: 200 for the claimed task, 404 for one the server does not
    know, 400 for a body that is not one."""
    task, _ = await _claimed(client)
    body = {"summary": "Launching claude", "step": 1, "total": 2}
    taken = await client.post(_task_url(task["id"], "progress"), json=body)
    unknown = await client.post(_task_url("nope", "progress"), json=body)
    bad = await client.post(_task_url(task["id"], "progress"), json={"step": "one"})
    assert (taken.status_code, taken.json()) == (200, {"status": "ok"})
    assert (unknown.status_code, bad.status_code) == (404, 400)


async def test_list_tasks_by_status(client: httpx.AsyncClient) -> None:
    """The task list filters by status and keeps creation order."""
    task, _ = await _claimed(client)
    queued = [(await _create(client))["id"] for _ in range(2)]
    listed = (await client.get("/api/tasks", params={"status": "queued"})).json()
    assert [t["id"] for t in listed] == queued
    everything = (await client.get("/api/tasks")).json()
    assert [t["id"] for t in everything] == [task["id"], *queued]
    assert all("auth_token" not in t for t in everything)


async def test_runtimes_list_shows_registration_and_heartbeat(client: httpx.AsyncClient) -> None:
    """The runtime list shows what each daemon registered, and deregister takes it offline."""
    runtime = (await register_http(client, "d9", "codex"))["codex"]
    [shown] = (await client.get("/api/runtimes")).json()
    assert (shown["id"], shown["daemon_id"], shown["provider"], shown["status"]) == (
        runtime,
        "d9",
        "codex",
        "online",
    )
    assert shown["device_name"] == "test-box"
    assert shown["last_heartbeat_at"]
    answer = await client.post("/api/daemon/deregister", json={"runtime_ids": [runtime]})
    assert answer.json()["deregistered"] == 1
    assert (await client.get("/api/runtimes")).json()[0]["status"] == "offline"


async def test_task_in_another_workspace(client: httpx.AsyncClient) -> None:
    """Tasks can be queued in an added workspace, which the daemon then lists."""
    created = await client.post("/api/workspaces", json={"id": "team", "name": "Team"})
    assert created.status_code == 201
    task = await _create(client, workspace_id="team")
    assert task["workspace_id"] == "team"
    names = [w["name"] for w in (await client.get("/api/daemon/workspaces")).json()]
    assert names == ["Default", "Team"]
    missing = await client.post("/api/tasks", json={"prompt": "p", "workspace_id": "nope"})
    assert (missing.status_code, missing.json()) == (404, {"error": "workspace not found"})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "malformed JSON body"),
        (b"\xff\xfe", "malformed JSON body"),
        (b"[1, 2]", "the body must be a JSON object"),
        (b'{"daemon_id": "d1", "runtime_ids": []}', "max_tasks: Field required"),
        (b'{"daemon_id": "d1", "runtime_ids": "r", "max_tasks": 1}', "runtime_ids"),
        (b'{"daemon_id": "d1", "runtime_ids": [], "max_tasks": -1}', "max_tasks"),
    ],
)
async def test_bad_body_is_400(asgi_client: httpx.AsyncClient, body: bytes, message: str) -> None:
    """A body that is not JSON, not an object, or misses a field is a 400 naming the problem."""
    answer = await asgi_client.post(
        "/api/daemon/tasks/claim", content=body, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400
    assert message in answer.json()["error"]


async def test_oversized_body_is_413(store: Store) -> None:
    """A body over the limit is refused before it is read, declared size or streamed."""
    transport = httpx.ASGITransport(app=create_app(store, TOKEN, max_body=1000))
    big = {"messages": [{"seq": 1, "type": "text", "content": "x" * 2000}]}

    async def streamed() -> AsyncIterator[bytes]:
        for _ in range(3):
            yield b"x" * 600

    async with httpx.AsyncClient(
        transport=transport, base_url="http://127.0.0.1", headers=AUTH
    ) as c:
        task = (await c.post("/api/tasks", json={"prompt": "p"})).json()
        declared = await c.post(_task_url(task["id"], "messages"), json=big)
        chunked = await c.post(
            _task_url(task["id"], "messages"),
            content=streamed(),
            headers={"content-type": "application/json"},
        )
        assert (await c.get(f"/api/tasks/{task['id']}/messages")).json() == []
    assert (declared.status_code, chunked.status_code) == (413, 413)
    assert "over 1000 bytes" in declared.json()["error"]


async def test_malformed_json_is_400_not_500(client: httpx.AsyncClient) -> None:
    """Over a real socket, a truncated JSON body gets a JSON 400, never a server error."""
    task = await _create(client)
    answer = await client.post(
        _task_url(task["id"], "messages"),
        content=b'{"messages": [{"seq": 1,',
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("malformed JSON body")


async def test_bad_query_parameters_are_400(client: httpx.AsyncClient) -> None:
    """Unknown status filters and non-integer sequence numbers are refused clearly."""
    bad_status = await client.get("/api/tasks", params={"status": "done"})
    task = await _create(client)
    bad_seq = await client.get(f"/api/tasks/{task['id']}/messages", params={"after_seq": "x"})
    assert (bad_status.status_code, bad_seq.status_code) == (400, 400)
    assert "unknown status" in bad_status.json()["error"]


async def test_unknown_route_and_method_are_json_errors(client: httpx.AsyncClient) -> None:
    """Routing errors use the same JSON error shape and never say 'task not found'."""
    missing = await client.get("/api/nothing-here")
    wrong = await client.delete("/api/tasks")
    assert (missing.status_code, missing.json()) == (404, {"error": "not found"})
    assert (wrong.status_code, wrong.json()) == (405, {"error": "method not allowed"})


async def test_start_of_a_task_not_dispatched_is_400(client: httpx.AsyncClient) -> None:
    """As Multica's StartTask: only a dispatched task starts; queued, running, cancelled → 400."""
    queued = await _create(client)
    answer = await client.post(_task_url(queued["id"], "start"), json={})
    assert answer.status_code == 400
    assert "queued, not dispatched" in answer.json()["error"]
    task, _ = await _claimed(client)
    assert (await client.post(_task_url(task["id"], "start"), json={})).status_code == 200
    again = await client.post(_task_url(task["id"], "start"), json={})
    cancelled, _ = await _claimed(client)
    await client.post(f"/api/tasks/{cancelled['id']}/cancel")
    late = await client.post(_task_url(cancelled["id"], "start"), json={})
    assert (again.status_code, late.status_code) == (400, 400)
    shown = (await client.get(f"/api/tasks/{cancelled['id']}")).json()
    assert (shown["status"], shown["started_at"]) == ("cancelled", None)


async def test_a_dispatched_tasks_prepare_lease_is_renewed_until_it_starts(
    client: httpx.AsyncClient,
) -> None:
    """As Multica's ExtendTaskPrepareLease: 200 while dispatched, 400 once running."""
    task, runtime = await _claimed(client)
    url = f"/api/daemon/runtimes/{runtime}/tasks/{task['id']}/prepare-lease"
    assert (await client.post(url, json={})).status_code == 200
    await client.post(_task_url(task["id"], "start"), json={})
    late = await client.post(url, json={})
    assert late.status_code == 400 and "running, not dispatched" in late.json()["error"]


async def test_claim_skips_unknown_and_foreign_runtimes(client: httpx.AsyncClient) -> None:
    """As Multica's ClaimTasksByRuntime: an unknown runtime id, or another daemon's, is
    skipped (never a 404), and the daemon's own runtimes still get their tasks."""
    await _create(client)
    theirs = (await register_http(client, "d2"))["claude"]
    only_unknown = await client.post(
        "/api/daemon/tasks/claim",
        json={"daemon_id": "d1", "runtime_ids": ["lost"], "max_tasks": 1},
    )
    assert (only_unknown.status_code, only_unknown.json()) == (200, {"tasks": []})
    assert await claim_http(client, "d1", [theirs], 1) == []
    mine = (await register_http(client, "d1"))["claude"]
    [task] = await claim_http(client, "d1", ["lost", theirs, mine], 1)
    assert (task["runtime_id"], task["auth_token"][:4]) == (mine, "mat_")
    assert len(task["auth_token"]) == 44


async def test_token_is_required_when_configured(db_path: Path) -> None:
    """With a token set, requests without it or with another one get 401; with it, 200."""
    async with running_server(db_path, token="s3cret") as url, httpx.AsyncClient(base_url=url) as c:
        none = await c.get("/api/daemon/workspaces")
        wrong = await c.get("/api/daemon/workspaces", headers={"Authorization": "Bearer nope"})
        right = await c.get("/api/daemon/workspaces", headers={"Authorization": "Bearer s3cret"})
        bad_route = await c.get("/api/nothing", headers={"Authorization": "Bearer s3cret"})
    assert (none.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert none.json() == {"error": "unauthorized"}
    assert bad_route.status_code == 404
