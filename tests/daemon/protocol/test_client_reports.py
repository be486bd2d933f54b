"""The client's transcript and report calls: re-sent only when that cannot store a seq twice,
and a refused result never left unsaid."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from daemon.errors import TaskGoneError, UnconfirmedError
from daemon.protocol.client import ServerClient, make_http_client
from daemon.protocol.reports import TerminalReport
from daemon.protocol.runtime_models import RuntimeInfo
from daemon.protocol.wire import DEDUPE_HEADER, TASK_STATUS_HEADER
from tests.daemon.protocol.test_client import make_harness
from tests.fakes.multica_server import multica_server
from tests.helpers import TOKEN, embedded_server

pytestmark = pytest.mark.anyio

PATH = "/api/daemon/tasks/t1/messages"
BATCH = [{"seq": 1, "type": "text", "content": "a"}]
RUNTIME = [RuntimeInfo(name="s", type="scripted", version="1")]
STORED = httpx.Response(200, json={"status": "ok"})
DEDUPED = httpx.Response(200, json={"status": "ok"}, headers={DEDUPE_HEADER: "seq"})


ServerAndClient = tuple[ServerClient, str, Callable[[], Awaitable[None]]]
"""A client of a real server, the workspace to register in, and a call queueing one task."""


@asynccontextmanager
async def embedded_client(tmp_path: Path) -> AsyncIterator[ServerAndClient]:
    """A client of the embedded server."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        make_http_client(url, TOKEN, "test") as http,
    ):

        async def queue_task() -> None:
            assert (await http.post("/api/tasks", json={"prompt": "hi"})).status_code == 201

        yield ServerClient(http), "default", queue_task


@asynccontextmanager
async def multica_client() -> AsyncIterator[ServerAndClient]:
    """A client of the Multica-faithful fake."""
    async with multica_server() as fake, make_http_client(fake.url, "", "test") as http:

        async def queue_task() -> None:
            fake.queue_issue()

        yield ServerClient(http), fake.workspace_id, queue_task


@pytest.mark.parametrize(
    "lost",
    [
        httpx.ReadTimeout("read timed out"),
        httpx.RemoteProtocolError("server disconnected without sending a response"),
        httpx.ReadError("connection reset by peer"),
        httpx.Response(500),
        httpx.Response(502),
    ],
    ids=["read-timeout", "disconnected", "reset", "500", "502"],
)
async def test_an_answer_lost_after_sending_is_not_resent_without_dedupe(
    lost: Exception | httpx.Response,
) -> None:
    """Without the server's dedupe header, a batch that may be stored is sent once only."""
    h = make_harness()
    route = h.router.post(PATH).mock(side_effect=[lost, STORED])
    with pytest.raises(UnconfirmedError):
        await h.client.send_messages("t1", BATCH)
    assert route.call_count == 1


async def test_an_answer_lost_is_resent_once_the_server_said_it_dedupes() -> None:
    """After an answer carrying `X-Message-Dedupe: seq`, a lost answer is retried."""
    h = make_harness()
    route = h.router.post(PATH).mock(side_effect=[DEDUPED, httpx.ReadTimeout("slow"), DEDUPED])
    await h.client.send_messages("t1", BATCH)
    assert h.client.dedupes
    await h.client.send_messages("t1", BATCH)
    assert route.call_count == 3


@pytest.mark.parametrize(
    "unsent",
    [
        httpx.ConnectError("connection refused"),
        httpx.ConnectTimeout("connect timed out"),
        httpx.PoolTimeout("no connection free"),
        httpx.WriteTimeout("write timed out"),
        httpx.Response(429, headers={"Retry-After": "0"}),
        httpx.Response(408),
    ],
    ids=["connect", "connect-timeout", "pool-timeout", "write-timeout", "429", "408"],
)
async def test_a_batch_that_surely_was_not_stored_is_retried(
    unsent: Exception | httpx.Response,
) -> None:
    """A failure before the request was written (or a refusal before it was handled) is safe
    to re-send on any server."""
    h = make_harness()
    route = h.router.post(PATH).mock(side_effect=[unsent, STORED])
    await h.client.send_messages("t1", BATCH)
    assert route.call_count == 2


async def test_the_dedupe_flag_follows_every_answer() -> None:
    """A server that stops saying it dedupes is no longer trusted to."""
    h = make_harness()
    h.router.post(PATH).mock(side_effect=[DEDUPED, STORED])
    await h.client.send_messages("t1", BATCH)
    assert h.client.dedupes
    await h.client.send_messages("t1", BATCH)
    assert not h.client.dedupes


@pytest.mark.parametrize(
    ("header", "told"),
    [("running", "running"), (" Cancelled ", "cancelled"), ("", None), ("x" * 33, None)],
    ids=["running", "spaced", "empty", "too-long"],
)
async def test_a_transcript_answer_names_the_task_status_when_it_says_one(
    header: str, told: str | None
) -> None:
    """`X-Task-Status` on the answer is the task's status; a value that is no status word is
    not taken for one."""
    h = make_harness()
    answer = httpx.Response(200, json={"status": "ok"}, headers={TASK_STATUS_HEADER: header})
    h.router.post(PATH).mock(return_value=answer)
    assert await h.client.send_messages("t1", BATCH) == told


async def test_the_embedded_server_names_the_status_and_multica_does_not(tmp_path: Path) -> None:
    """Against the real servers: the embedded one says `running` for a running task's batch;
    the Multica-faithful one names nothing."""
    for server, told in ((embedded_client(tmp_path), "running"), (multica_client(), None)):
        async with server as (client, workspace_id, queue_task):
            registered = await client.register(workspace_id, "d-1", "host", "1", RUNTIME)
            await queue_task()
            (task,) = await client.claim("d-1", [registered.runtimes[0].id], 1)
            await client.start_task(task.id)
            assert await client.send_messages(task.id, BATCH) == told


async def test_a_refused_result_is_sent_shorter_then_as_a_failure() -> None:
    """413 for a long result: the result again, cut short; 413 again: a `fail` saying why."""
    h = make_harness()
    too_large = httpx.Response(413, json={"error": "request body over 16 bytes"})
    complete = h.router.post("/api/daemon/tasks/t1/complete").mock(return_value=too_large)
    fail = h.router.post("/api/daemon/tasks/t1/fail").mock(return_value=STORED)
    report = TerminalReport(kind="complete", output="r" * 1_000_000, session_id="s-1")
    await h.client.send_report("t1", report)
    sizes = [len(json.loads(c.request.content)["output"]) for c in complete.calls]
    assert len(sizes) == 2 and sizes[1] < sizes[0]
    (sent,) = fail.calls
    body = json.loads(sent.request.content)
    assert body["error"] == "the server refused the task's result: request body over 16 bytes"
    assert body["session_id"] == "s-1"


async def test_a_result_for_a_gone_task_is_not_turned_into_a_failure() -> None:
    """404 `task not found` refuses any report: it is raised, nothing else is sent."""
    h = make_harness()
    gone = httpx.Response(404, json={"error": "task not found"})
    h.router.post("/api/daemon/tasks/t1/complete").mock(return_value=gone)
    fail = h.router.post("/api/daemon/tasks/t1/fail").mock(return_value=STORED)
    with pytest.raises(TaskGoneError):
        await h.client.send_report("t1", TerminalReport(kind="complete", output="done"))
    assert fail.call_count == 0


async def test_a_deduplicating_server_is_known_from_its_register_answer(tmp_path: Path) -> None:
    """The embedded server says it dedupes when the daemon registers, before any transcript;
    the Multica-faithful one does not."""
    for server, dedupes in ((embedded_client(tmp_path), True), (multica_client(), False)):
        async with server as (client, workspace_id, _):
            await client.register(workspace_id, "d-1", "host", "1", RUNTIME)
            assert client.dedupes is dedupes
