"""Tests for the reference server's user task API client (`submit --wait` uses it)."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest
import respx

from daemon.cli.tasks_api import TRANSPORT_RETRY, TasksApi
from daemon.errors import MalformedResponseError, TaskGoneError, TransientServerError
from daemon.protocol.models import Agent
from daemon.testing import RecordingSleep

BASE = "http://server.test"


def make_api() -> tuple[respx.Router, TasksApi, RecordingSleep]:
    router = respx.Router(base_url=BASE, assert_all_mocked=True)
    http = httpx.AsyncClient(base_url=BASE, transport=httpx.MockTransport(router.async_handler))
    sleep = RecordingSleep()
    return router, TasksApi(http, retry=replace(TRANSPORT_RETRY, sleep=sleep)), sleep


@pytest.mark.anyio
async def test_create_task_sends_only_given_fields() -> None:
    """A bare create sends only the prompt; options are added when given."""
    router, api, _ = make_api()
    route = router.post("/api/tasks").mock(
        return_value=httpx.Response(201, json={"id": "t1", "status": "queued"})
    )
    assert (await api.create_task("hello"))["id"] == "t1"
    assert json.loads(route.calls.last.request.content) == {"prompt": "hello"}
    await api.create_task("p", backend="claude", workspace_id="ws", agent=Agent(model="m"))
    sent = json.loads(route.calls.last.request.content)
    assert (sent["backend"], sent["workspace_id"], sent["agent"]["model"]) == ("claude", "ws", "m")


@pytest.mark.anyio
async def test_create_is_retried_only_when_the_request_never_left() -> None:
    """A connect failure is retried; a read error after sending is not (no duplicate task)."""
    router, api, sleep = make_api()
    route = router.post("/api/tasks").mock(
        side_effect=[httpx.ConnectError("refused"), httpx.Response(201, json={"id": "t1"})]
    )
    assert (await api.create_task("x"))["id"] == "t1"
    assert route.call_count == 2
    assert sleep.delays == [0.5]
    route.mock(side_effect=httpx.ReadError("reset"))
    with pytest.raises(TransientServerError, match="ReadError"):
        await api.create_task("x")
    assert route.call_count == 3


@pytest.mark.anyio
async def test_reads_are_retried_on_transport_errors() -> None:
    """A GET survives two transport errors; a third in a row is raised."""
    router, api, sleep = make_api()
    route = router.get("/api/tasks/t1").mock(
        side_effect=[
            httpx.ReadError("reset"),
            httpx.ReadTimeout("slow"),
            httpx.Response(200, json={"id": "t1", "status": "running"}),
        ]
    )
    assert (await api.get_task("t1"))["status"] == "running"
    assert sleep.delays == [0.5, 1.0]
    route.mock(side_effect=httpx.ReadError("reset"))
    with pytest.raises(TransientServerError):
        await api.get_task("t1")


@pytest.mark.anyio
async def test_http_errors_are_raised_without_retry() -> None:
    """A 5xx or a 404 is raised at once as the error it stands for."""
    router, api, sleep = make_api()
    route = router.get("/api/tasks/t1").mock(return_value=httpx.Response(503))
    with pytest.raises(TransientServerError):
        await api.get_task("t1")
    route.mock(return_value=httpx.Response(404, json={"error": "task not found"}))
    with pytest.raises(TaskGoneError):
        await api.get_task("t1")
    assert route.call_count == 2
    assert sleep.delays == []


@pytest.mark.anyio
async def test_messages_after_seq() -> None:
    """`after_seq` is sent and also applied here, so a server ignoring it repeats nothing."""
    router, api, _ = make_api()
    route = router.get("/api/tasks/t1/messages").mock(
        return_value=httpx.Response(
            200, json=[{"seq": 3, "type": "text"}, {"seq": 1}, {"seq": 2}, {"seq": 4}]
        )
    )
    got = await api.messages("t1", after_seq=2)
    assert [m["seq"] for m in got] == [3, 4]
    assert route.calls.last.request.url.params["after_seq"] == "2"
    assert [m["seq"] for m in await api.messages("t1")] == [1, 2, 3, 4]
    assert "after_seq" not in route.calls.last.request.url.params


@pytest.mark.anyio
async def test_lists_may_come_wrapped() -> None:
    """`{"messages": [...]}` and `{"tasks": [...]}` are read like bare lists."""
    router, api, _ = make_api()
    router.get("/api/tasks/t1/messages").mock(
        return_value=httpx.Response(200, json={"messages": [{"seq": 1}]})
    )
    route = router.get("/api/tasks").mock(
        return_value=httpx.Response(200, json={"tasks": [{"id": "a"}]})
    )
    assert await api.messages("t1") == [{"seq": 1}]
    assert await api.list_tasks(status="running") == [{"id": "a"}]
    assert route.calls.last.request.url.params["status"] == "running"


@pytest.mark.anyio
async def test_cancel_posts_and_returns_the_task() -> None:
    """Cancel posts to the task's cancel path and returns the task."""
    router, api, _ = make_api()
    router.post("/api/tasks/t1/cancel").mock(
        return_value=httpx.Response(200, json={"id": "t1", "status": "cancelled"})
    )
    assert (await api.cancel("t1"))["status"] == "cancelled"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "response",
    [httpx.Response(200, text="not json"), httpx.Response(200, json=["a", "b"])],
)
async def test_bad_bodies_are_malformed(response: httpx.Response) -> None:
    """A body that is not JSON, or not the expected shape, raises MalformedResponseError."""
    router, api, _ = make_api()
    router.get("/api/tasks").mock(return_value=response)
    router.get("/api/tasks/t1").mock(return_value=response)
    with pytest.raises(MalformedResponseError):
        await api.list_tasks()
    with pytest.raises(MalformedResponseError):
        await api.get_task("t1")
