"""Out-of-range numbers are 4xx, never a 500, and task lists come in bounded pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.server.store import MAX_PAGE, Store
from tests.helpers import embedded_server, server_client

pytestmark = pytest.mark.anyio

TOO_BIG = "99999999999999999999"


@pytest.fixture
async def client(db_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with embedded_server(db_path) as url, server_client(url, daemon_id="d1") as http:
        yield http


async def _task(client: httpx.AsyncClient) -> str:
    return str((await client.post("/api/tasks", json={"prompt": "p"})).json()["id"])


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/tasks", {"limit": TOO_BIG}),
        ("/api/tasks", {"limit": "-" + TOO_BIG}),
        ("/api/tasks", {"limit": "0"}),
        ("/api/tasks", {"limit": str(MAX_PAGE + 1)}),
        ("/api/tasks/{id}/messages", {"after_seq": TOO_BIG}),
        ("/api/tasks/{id}/messages", {"after_seq": "-" + TOO_BIG}),
        ("/api/tasks/{id}/messages", {"after_seq": str(2**63)}),
    ],
)
async def test_out_of_range_query_integers_are_400(
    client: httpx.AsyncClient, path: str, params: dict[str, str]
) -> None:
    """Integers beyond SQLite's range (or a page size out of bounds) are a 400 naming them."""
    answer = await client.get(path.format(id=await _task(client)), params=params)
    assert answer.status_code == 400, answer.text
    assert next(iter(params)) in answer.json()["error"]


async def test_the_largest_sqlite_integer_is_still_accepted(client: httpx.AsyncClient) -> None:
    """The bound is SQLite's own: 2**63 - 1 works as after_seq and as a message seq."""
    task_id = await _task(client)
    top = 2**63 - 1
    body = {"messages": [{"seq": top, "type": "text", "content": "last"}]}
    assert (await client.post(f"/api/daemon/tasks/{task_id}/messages", json=body)).is_success
    messages = f"/api/tasks/{task_id}/messages"
    assert [m["seq"] for m in (await client.get(messages)).json()] == [top]
    assert (await client.get(messages, params={"after_seq": str(top)})).json() == []


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("messages", {"messages": [{"seq": 2**63, "type": "text"}]}),
        ("messages", {"messages": [{"seq": -(2**63) - 1, "type": "text"}]}),
        ("messages", {"messages": [{"seq": 1, "type": "text"}, {"seq": 10**30, "type": "x"}]}),
        ("usage", {"usage": [{"provider": "p", "model": "m", "input_tokens": 2**63}]}),
        ("usage", {"usage": [{"provider": "p", "model": "m", "cache_read_tokens": 10**40}]}),
    ],
)
async def test_out_of_range_body_integers_are_400_and_store_nothing(
    client: httpx.AsyncClient, store: Store, route: str, body: dict[str, Any]
) -> None:
    """A seq or a token count beyond SQLite's range refuses the whole batch with a 400."""
    task_id = await _task(client)
    answer = await client.post(f"/api/daemon/tasks/{task_id}/{route}", json=body)
    assert answer.status_code == 400, answer.text
    assert store.messages(task_id) == [] and store.usage(task_id) == []


async def test_a_huge_max_tasks_is_400_and_a_large_one_is_capped(
    client: httpx.AsyncClient,
) -> None:
    """max_tasks beyond SQLite's range is refused; any other large value claims at most 32."""
    claim = {"daemon_id": "d1", "runtime_ids": [], "max_tasks": 2**64}
    assert (await client.post("/api/daemon/tasks/claim", json=claim)).status_code == 400
    claim["max_tasks"] = 2**62
    assert (await client.post("/api/daemon/tasks/claim", json=claim)).json() == {"tasks": []}


async def test_tasks_are_listed_in_bounded_pages(client: httpx.AsyncClient, store: Store) -> None:
    """100 tasks a page by default, at most MAX_PAGE; `X-Next-After` leads to the next page
    and is absent on the last one; `after` and `status` combine."""
    created = [store.create_task(f"p{i}")["id"] for i in range(130)]
    first = await client.get("/api/tasks")
    assert [t["id"] for t in first.json()] == created[:100]
    assert first.headers["X-Next-After"] == created[99]
    rest = await client.get("/api/tasks", params={"after": first.headers["X-Next-After"]})
    assert [t["id"] for t in rest.json()] == created[100:]
    assert "X-Next-After" not in rest.headers
    small = await client.get("/api/tasks", params={"limit": "7", "after": created[7]})
    assert [t["id"] for t in small.json()] == created[8:15]
    store.cancel(created[20])
    cancelled = await client.get("/api/tasks", params={"status": "cancelled", "after": created[3]})
    assert [t["id"] for t in cancelled.json()] == [created[20]]
    assert len((await client.get("/api/tasks", params={"limit": str(MAX_PAGE)})).json()) == 130
    unknown = await client.get("/api/tasks", params={"after": "no-such-task"})
    assert (unknown.status_code, unknown.json()) == (404, {"error": "task not found"})
