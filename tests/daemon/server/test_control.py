"""The embedded server's control WebSocket and its refusal of tasks nobody serves."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from daemon.server.serve import running_server
from tests.daemon.server.helpers import register_http
from tests.helpers import TOKEN, embedded_server, server_client

pytestmark = pytest.mark.anyio


@pytest.fixture
async def url(db_path: Path) -> AsyncIterator[str]:
    async with embedded_server(db_path) as base:
        yield base


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _ws(url: str, *runtime_ids: str) -> str:
    return url.replace("http://", "ws://") + "/api/daemon/ws?runtime_ids=" + ",".join(runtime_ids)


async def _frame(ws: ClientConnection, within: float = 10) -> dict[str, object]:
    with anyio.fail_after(within):
        frame: dict[str, object] = json.loads(await ws.recv())
    return frame


async def test_queued_task_is_announced_to_the_runtime_that_may_claim_it(url: str) -> None:
    """Only the connection holding a runtime of the task's backend hears of it, with its id."""
    async with server_client(url) as http:
        ids = await register_http(http, "d1", "claude", "codex")
        async with (
            connect(_ws(url, ids["claude"]), additional_headers=AUTH) as claude,
            connect(_ws(url, ids["codex"]), additional_headers=AUTH) as codex,
        ):
            created = await http.post("/api/tasks", json={"prompt": "p", "backend": "codex"})
            task_id = created.json()["id"]
            frame = await _frame(codex)
            assert frame == {
                "type": "daemon:task_available",
                "payload": {"runtime_id": ids["codex"], "task_id": task_id},
            }
            created = await http.post("/api/tasks", json={"prompt": "p", "backend": "claude"})
            first_for_claude = await _frame(claude)
    # The codex task was announced first; the claude connection's first frame is its own task.
    assert first_for_claude["payload"] == {
        "runtime_id": ids["claude"],
        "task_id": created.json()["id"],
    }


async def test_control_route_refuses_an_upgrade_without_the_token(db_path: Path) -> None:
    """The WebSocket upgrade needs the token as a bearer, like every HTTP request."""
    async with running_server(db_path, token="s3cret") as base:
        with pytest.raises(InvalidStatus) as refused:
            async with connect(_ws(base, "r1")):
                pass
        headers = {"Authorization": "Bearer s3cret"}
        async with connect(_ws(base, "r1"), additional_headers=headers) as ws:
            await ws.ping()
    assert refused.value.response.status_code == 403


async def test_task_for_a_backend_nobody_serves_is_refused_naming_the_available(
    url: str,
) -> None:
    """With daemons online, a task for a backend none serves is a 409 naming what they serve."""
    async with server_client(url) as http:
        await register_http(http, "d1", "claude", "scripted")
        answer = await http.post("/api/tasks", json={"prompt": "p", "backend": "codex"})
        queued = await http.get("/api/tasks")
    assert answer.status_code == 409
    assert "available: claude, scripted" in answer.json()["error"]
    assert queued.json() == []


async def test_task_is_queued_while_no_daemon_is_online(url: str) -> None:
    """With no runtime online a daemon may still come, so the task is queued."""
    async with server_client(url) as http:
        answer = await http.post("/api/tasks", json={"prompt": "p", "backend": "codex"})
    assert answer.status_code == 201


def _submit_env(url: str, home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "MULTICA_SERVER_URL": url,
        "MULTICA_DAEMON_STATE_DIR": str(home / "state"),
        "MULTICA_DAEMON_TOKEN": TOKEN,
    }


async def test_submit_shows_the_refusal(url: str, tmp_path: Path) -> None:
    """`agent-daemon submit --backend codex` fails with the server's reason, not a silent wait."""
    async with server_client(url) as http:
        await register_http(http, "d1", "scripted")
    done = await anyio.run_process(
        [sys.executable, "-m", "daemon", "submit", "--backend", "codex", "--wait", "hi"],
        env=_submit_env(url, tmp_path),
        check=False,
    )
    assert done.returncode == 1
    assert b"available: scripted" in done.stderr


async def test_submit_wait_says_what_a_queued_task_waits_for(url: str, tmp_path: Path) -> None:
    """With no daemon yet, `submit --wait` says which backend the queued task waits for."""
    args = [sys.executable, "-m", "daemon", "submit", "--backend", "codex", "--wait", "hi"]
    env = _submit_env(url, tmp_path)
    async with await anyio.open_process(args, env=env, stderr=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        seen = b""
        with anyio.fail_after(30):
            while b"waiting for a daemon serving backend codex" not in seen:
                seen += await proc.stdout.receive()
        proc.terminate()


async def _send(ws: ClientConnection, kind: str, payload: dict[str, object]) -> None:
    await ws.send(json.dumps({"type": kind, "payload": payload}))


async def test_a_heartbeat_on_the_socket_is_acked_saying_rpc_v1(url: str) -> None:
    """A heartbeat of a connection's runtime is answered on the socket, as Multica's hub does:
    `ok` and `rpc-v1`; one for a runtime the connection did not name gets no answer."""
    async with server_client(url) as http:
        ids = await register_http(http, "d1", "claude", "codex")
        async with connect(_ws(url, ids["claude"]), additional_headers=AUTH) as ws:
            await _send(ws, "daemon:heartbeat", {"runtime_id": ids["codex"]})
            await _send(ws, "daemon:heartbeat", {"runtime_id": ids["claude"]})
            ack = await _frame(ws)
    assert ack == {
        "type": "daemon:heartbeat_ack",
        "payload": {
            "runtime_id": ids["claude"],
            "status": "ok",
            "server_capabilities": ["rpc-v1"],
        },
    }


async def test_a_claim_on_the_socket_is_answered_as_over_http(url: str) -> None:
    """`tasks.claim` dispatches the queued task and answers its claim body; a bad body is a
    400 and an unknown method a 404, each with its error in the body."""
    async with server_client(url) as http:
        ids = await register_http(http, "d1", "claude")
        created = (await http.post("/api/tasks", json={"prompt": "p"})).json()
        claim = {"daemon_id": "d1", "runtime_ids": [ids["claude"]], "max_tasks": 4}
        async with connect(_ws(url, ids["claude"]), additional_headers=AUTH) as ws:
            request = {"request_id": "r1", "method": "tasks.claim", "body": claim}
            await _send(ws, "daemon:rpc_request", {**request, "timeout_ms": 5000})
            answer = await _frame(ws)
            await _send(ws, "daemon:rpc_request", {"request_id": "r2", "method": "tasks.claim"})
            refused = await _frame(ws)
            await _send(ws, "daemon:rpc_request", {"request_id": "r3", "method": "tasks.drop"})
            unknown = await _frame(ws)
        task = (await http.get(f"/api/tasks/{created['id']}")).json()
    assert answer["type"] == "daemon:rpc_response"
    payload = answer["payload"]
    assert isinstance(payload, dict)
    assert (payload["request_id"], payload["status"]) == ("r1", 200)
    (claimed,) = payload["body"]["tasks"]
    assert claimed["id"] == created["id"] and claimed["runtime_id"] == ids["claude"]
    assert task["status"] == "dispatched"
    assert refused["payload"]["status"] == 400  # type: ignore[index]
    assert "daemon_id" in refused["payload"]["body"]["error"]  # type: ignore[index]
    assert unknown["payload"]["status"] == 404  # type: ignore[index]


async def test_a_heartbeat_of_a_deleted_runtime_is_acked_runtime_gone(db_path: Path) -> None:
    """The socket's twin of the 404 `runtime not found`: `runtime_gone` in the ack."""
    async with embedded_server(db_path) as url, server_client(url) as http:
        ids = await register_http(http, "d1", "claude")
        async with connect(_ws(url, ids["claude"]), additional_headers=AUTH) as ws:
            with contextlib.closing(sqlite3.connect(db_path)) as db, db:
                db.execute("DELETE FROM runtimes WHERE id = ?", (ids["claude"],))
            await _send(ws, "daemon:heartbeat", {"runtime_id": ids["claude"]})
            ack = await _frame(ws)
    assert ack["payload"] == {
        "runtime_id": ids["claude"],
        "status": "runtime_gone",
        "runtime_gone": True,
    }
