"""Who may reach the reference server: the token, its own Host, same-origin, JSON bodies, and
only the claiming daemon reporting on a task. Over a real uvicorn server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.protocol.wire import DAEMON_ID_HEADER
from daemon.server.store import Store
from tests.daemon.server.helpers import claim_http, register_http
from tests.helpers import embedded_server, server_client

pytestmark = pytest.mark.anyio

TASK_JSON = {"prompt": "rm -rf ~"}


@pytest.fixture
async def url(db_path: Path) -> AsyncIterator[str]:
    async with embedded_server(db_path) as base:
        yield base


@pytest.fixture
async def client(url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with server_client(url) as http:
        yield http


async def _queued(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    answer = await client.get("/api/tasks")
    assert answer.status_code == 200, answer.text
    tasks: list[dict[str, Any]] = answer.json()
    return tasks


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/daemon/workspaces"),
        ("POST", "/api/daemon/register"),
        ("POST", "/api/daemon/tasks/claim"),
        ("POST", "/api/tasks"),
        ("GET", "/api/tasks"),
        ("GET", "/api/runtimes"),
        ("GET", "/api/nothing-here"),
    ],
)
async def test_a_request_without_the_token_is_401(url: str, method: str, path: str) -> None:
    """Every route, even one that does not exist, wants the bearer token first."""
    async with httpx.AsyncClient(base_url=url) as anonymous:
        answer = await anonymous.request(method, path, json={})
    assert (answer.status_code, answer.json()) == (401, {"error": "unauthorized"})


async def test_a_browsers_cross_site_simple_post_queues_nothing(
    url: str, client: httpx.AsyncClient
) -> None:
    """The CSRF case: a page on another site POSTs text/plain JSON to /api/tasks → refused."""
    page = {"Content-Type": "text/plain", "Origin": "http://evil.example"}
    async with httpx.AsyncClient(base_url=url) as browser:
        answer = await browser.post("/api/tasks", content=b'{"prompt": "rm -rf ~"}', headers=page)
    assert answer.status_code == 403
    # Even a page that somehow had the token is stopped by its Origin.
    with_token = await client.post("/api/tasks", content=b'{"prompt": "x"}', headers=page)
    assert with_token.status_code == 403
    assert await _queued(client) == []


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
async def test_a_post_body_that_is_not_json_is_415(
    client: httpx.AsyncClient, content_type: str
) -> None:
    """A body a browser may send without a preflight is refused even with the token."""
    answer = await client.post(
        "/api/tasks", content=b'{"prompt": "x"}', headers={"Content-Type": content_type}
    )
    assert answer.status_code == 415
    assert await _queued(client) == []


async def test_a_post_body_without_a_content_type_is_415(client: httpx.AsyncClient) -> None:
    """A body with no declared type is not taken for JSON; an empty POST still works."""
    unlabelled = await client.post("/api/tasks", content=b'{"prompt": "x"}', headers={})
    assert unlabelled.status_code == 415
    task = (await client.post("/api/tasks", json=TASK_JSON)).json()
    assert (await client.post(f"/api/tasks/{task['id']}/cancel")).status_code == 200


@pytest.mark.parametrize(
    "host", ["attacker.example", "attacker.example:8080", "127.0.0.1.nip.io", "192.0.2.7", "[::1"]
)
async def test_a_host_that_is_not_this_server_is_403(client: httpx.AsyncClient, host: str) -> None:
    """DNS rebinding: a page under its own name that resolves to 127.0.0.1 is refused."""
    answer = await client.post("/api/tasks", json=TASK_JSON, headers={"Host": host})
    assert answer.status_code == 403
    assert "Host" in answer.json()["error"]
    assert await _queued(client) == []


@pytest.mark.parametrize("host", ["localhost", "localhost:8080", "127.0.0.1", "127.7.7.7:1"])
async def test_loopback_hosts_are_accepted(client: httpx.AsyncClient, host: str) -> None:
    """The names a local client uses for this server pass the Host check."""
    answer = await client.get("/api/daemon/workspaces", headers={"Host": host})
    assert answer.status_code == 200


async def test_on_every_interface_only_its_own_address_is_a_host(db_path: Path) -> None:
    """Listening on 0.0.0.0, the address a connection arrived at is accepted; a name is not."""
    async with embedded_server(db_path, host="0.0.0.0") as base:
        port = base.rsplit(":", 1)[1]
        async with server_client(f"http://127.0.0.1:{port}") as http:
            own = await http.get("/api/daemon/workspaces")
            named = await http.get("/api/daemon/workspaces", headers={"Host": "evil.example"})
    assert (own.status_code, named.status_code) == (200, 403)


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "http://localhost:1", "https://127.0.0.1", "http://[::1"],
)
async def test_an_origin_of_another_site_is_403(client: httpx.AsyncClient, origin: str) -> None:
    """Any Origin but this server's own (scheme, host and port) is refused, GET included."""
    listed = await client.get("/api/tasks", headers={"Origin": origin})
    queued = await client.post("/api/tasks", json=TASK_JSON, headers={"Origin": origin})
    assert (listed.status_code, queued.status_code) == (403, 403)
    assert await _queued(client) == []


async def test_the_servers_own_origin_is_accepted(url: str, client: httpx.AsyncClient) -> None:
    """A same-origin request (a page this server served, if it ever serves one) passes."""
    answer = await client.post("/api/tasks", json=TASK_JSON, headers={"Origin": url})
    assert answer.status_code == 201


async def _claimed_by_d1(client: httpx.AsyncClient) -> tuple[str, dict[str, str]]:
    """A task claimed by d1 while d2 is registered too; (task id, d2's identity header)."""
    task_id = (await client.post("/api/tasks", json=TASK_JSON)).json()["id"]
    await register_http(client, "d2")
    [task] = await claim_http(client, "d1", [(await register_http(client, "d1"))["claude"]], 1)
    assert task["id"] == task_id
    return task_id, {DAEMON_ID_HEADER: "d2"}


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("start", {}),
        ("messages", {"messages": [{"seq": 1, "type": "text", "content": "forged"}]}),
        ("usage", {"usage": [{"provider": "p", "model": "m", "input_tokens": 5}]}),
        ("complete", {"output": "forged"}),
        ("fail", {"error": "forged"}),
        ("cancel-ack", {}),
    ],
)
async def test_another_daemon_cannot_report_on_a_claimed_task(
    client: httpx.AsyncClient, store: Store, action: str, body: dict[str, Any]
) -> None:
    """Only the daemon holding the claim may report on the task: another one gets 403 and
    changes nothing; the holder itself is accepted."""
    task_id, other = await _claimed_by_d1(client)
    url = f"/api/daemon/tasks/{task_id}/{action}"
    refused = await client.post(url, json=body, headers=other)
    assert (refused.status_code, refused.json()) == (
        403,
        {"error": "the task is held by another daemon"},
    )
    task = store.task(task_id)
    assert (task["status"], task["claimed_by"], task["cancel_acked"]) == ("dispatched", "d1", False)
    assert (task["complete_calls"], task["fail_calls"]) == (0, 0)
    assert store.messages(task_id) == [] and store.usage(task_id) == []
    mine = await client.post(url, json=body, headers={DAEMON_ID_HEADER: "d1"})
    assert mine.status_code == 200


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("messages", {"messages": [{"seq": 1, "type": "text", "content": "forged"}]}),
        ("complete", {"output": "forged"}),
        ("fail", {"error": "forged"}),
    ],
)
async def test_a_report_naming_no_daemon_is_refused(
    client: httpx.AsyncClient, store: Store, action: str, body: dict[str, Any]
) -> None:
    """A daemon task route without `X-Daemon-ID` is never taken for the holder's report: 403,
    nothing stored (the daemon always names itself)."""
    task_id, _ = await _claimed_by_d1(client)
    refused = await client.post(f"/api/daemon/tasks/{task_id}/{action}", json=body)
    assert refused.status_code == 403
    assert "X-Daemon-ID" in refused.json()["error"]
    task = store.task(task_id)
    assert (task["status"], task["complete_calls"], task["fail_calls"]) == ("dispatched", 0, 0)
    assert store.messages(task_id) == []
