"""The daemon routes answer as Multica's Go handlers do (status codes and effects)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.protocol.wire import DEDUPE_HEADER
from daemon.server.store import Store
from tests.daemon.server.helpers import claim_http, register_http
from tests.helpers import embedded_server, server_client

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(db_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with embedded_server(db_path) as url, server_client(url, daemon_id="d1") as http:
        yield http


async def _dispatched(client: httpx.AsyncClient) -> dict[str, Any]:
    await client.post("/api/tasks", json={"prompt": "p"})
    [task] = await claim_http(client, "d1", [(await register_http(client))["claude"]], 1)
    return task


def _url(task: dict[str, Any], action: str) -> str:
    return f"/api/daemon/tasks/{task['id']}/{action}"


async def test_complete_of_a_task_that_is_not_running_is_200_and_changes_nothing(
    client: httpx.AsyncClient, store: Store
) -> None:
    """CompleteTask: `CompleteAgentTask` matches only running rows; the rest are answered
    200 as already final. Queued (never claimed) and dispatched (never started) alike."""
    task = await _dispatched(client)
    queued = (await client.post("/api/tasks", json={"prompt": "q"})).json()
    early = await client.post(_url(task, "complete"), json={"output": "too early"})
    unclaimed = await client.post(_url(queued, "complete"), json={"output": "x"})
    assert (early.status_code, early.json()["status"]) == (200, "dispatched")
    assert (unclaimed.status_code, unclaimed.json()["status"]) == (200, "queued")
    assert store.task(task["id"])["output"] is None


async def test_fail_of_a_dispatched_task_fails_it_with_a_classified_reason(
    client: httpx.AsyncClient,
) -> None:
    """FailTask: a dispatched task may fail (the agent never started); an empty reason is
    classified from the error text (taskfailure.Classify)."""
    task = await _dispatched(client)
    body = {"error": "start task failed: dial tcp 127.0.0.1:1: connection refused"}
    answer = await client.post(_url(task, "fail"), json=body)
    assert (answer.status_code, answer.json()["status"]) == (200, "failed")
    shown = (await client.get(f"/api/tasks/{task['id']}")).json()
    assert shown["failure_reason"] == "agent_error.provider_network"


async def test_a_claim_hands_out_at_most_32_tasks(client: httpx.AsyncClient) -> None:
    """ClaimTasksByRuntime caps a batch at claimBatchMaxTasksCap (32)."""
    for i in range(33):
        await client.post("/api/tasks", json={"prompt": f"p{i}"})
    runtime = (await register_http(client))["claude"]
    assert len(await claim_http(client, "d1", [runtime], 100)) == 32
    assert len(await claim_http(client, "d1", [runtime], 100)) == 1


async def test_the_messages_answer_says_re_sends_are_deduplicated(
    client: httpx.AsyncClient, store: Store
) -> None:
    """The embedded server stores each (task, seq) once and says so on every messages answer;
    a daemon may re-send a batch whose answer it lost only to a server that says this."""
    task = await _dispatched(client)
    body = {"messages": [{"seq": 1, "type": "text", "content": "hi"}]}
    first = await client.post(_url(task, "messages"), json=body)
    again = await client.post(_url(task, "messages"), json=body)
    assert (first.headers[DEDUPE_HEADER], again.headers[DEDUPE_HEADER]) == ("seq", "seq")
    assert (first.json()["stored"], again.json()["stored"]) == (1, 0)
    assert len(store.messages(task["id"])) == 1
