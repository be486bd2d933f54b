"""Instant pickup: the claim loop and a run's status check wake on the server's news.

Each daemon here polls once an hour, so a task that completes within the test's window was
claimed (or stopped) because of a wakeup, never because of the poll.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
import uvicorn

from daemon.server.app import create_app
from daemon.server.in_process import InProcess
from daemon.server.serve import _bind, _Server
from daemon.server.store import Store
from tests.fakes.multica_server import multica_server
from tests.helpers import TOKEN, embedded_server, eventually, running_daemon, server_client

pytestmark = pytest.mark.anyio

HOUR = "1h"
_QUICK = {"steps": [{"emit": {"type": "text", "content": "hi"}}, {"result": {"output": "ok"}}]}


async def test_task_queued_in_process_wakes_the_claim_loop(tmp_path: Path) -> None:
    """A task queued on the embedded server in this process is claimed without a poll."""
    embedded = InProcess()
    async with (
        embedded_server(tmp_path / "server.db", in_process=embedded) as url,
        running_daemon(tmp_path, url, in_process=embedded, MULTICA_DAEMON_POLL_INTERVAL=HOUR) as d,
    ):
        # The first claim after start-up found nothing; only a wakeup can claim these.
        for _ in range(3):
            task = await d.wait(await d.submit(_QUICK), within=15)
            assert task["status"] == "completed"


async def test_more_tasks_than_one_claim_hands_out_are_all_claimed_at_once(
    tmp_path: Path,
) -> None:
    """40 tasks queued before the daemon starts: the server hands out 32 a claim, and the
    daemon asks again at once for the rest instead of waiting for the poll or a free slot."""
    embedded = InProcess()
    long = {"steps": [{"emit": {"type": "text", "content": "hi"}}, {"sleep": 600}]}
    async with embedded_server(tmp_path / "server.db", in_process=embedded) as url:
        async with server_client(url) as http:
            for _ in range(40):
                queued = await http.post("/api/tasks", json={"prompt": json.dumps(long)})
                assert queued.status_code == 201
        async with running_daemon(
            tmp_path,
            url,
            in_process=embedded,
            MULTICA_DAEMON_POLL_INTERVAL=HOUR,
            MULTICA_DAEMON_MAX_CONCURRENT_TASKS="50",
            MULTICA_DAEMON_SHUTDOWN_GRACE="0s",
        ) as d:
            await eventually(lambda: len(d.worker.runs) == 40, within=30)


async def test_cancel_in_process_stops_the_run_without_a_status_poll(tmp_path: Path) -> None:
    """A cancel on the embedded server stops the run at once, not at the next status poll."""
    embedded = InProcess()
    script = {"steps": [{"emit": {"type": "text", "content": "hi"}}, {"sleep": 600}]}
    async with (
        embedded_server(tmp_path / "server.db", in_process=embedded) as url,
        running_daemon(
            tmp_path,
            url,
            in_process=embedded,
            MULTICA_DAEMON_POLL_INTERVAL="100ms",
            MULTICA_DAEMON_STATUS_POLL_INTERVAL=HOUR,
        ) as d,
    ):
        task_id = await d.submit(script)
        await d.started(task_id)
        task = await d.cancel(task_id, within=15)
    assert task["status"] == "cancelled"
    assert task["cancel_acked"]


async def test_task_available_frame_wakes_a_daemon_of_a_separate_server(tmp_path: Path) -> None:
    """Over the control WebSocket, a queued task is claimed at once by a daemon polling hourly."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(tmp_path, url, control=True, MULTICA_DAEMON_POLL_INTERVAL=HOUR) as d,
    ):
        channel = d.worker.pickup.channel
        assert channel is not None
        with anyio.fail_after(15):
            await channel.connected.wait()
        for _ in range(3):
            task = await d.wait(await d.submit(_QUICK), within=15)
            assert task["status"] == "completed"


async def test_the_channel_follows_the_daemon_to_its_new_runtime(tmp_path: Path) -> None:
    """The server deleted the runtime: the daemon registers again and reopens the channel for
    the new runtime, so a task queued for it is claimed without waiting for the poll."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, control=True, MULTICA_DAEMON_POLL_INTERVAL=HOUR) as d,
    ):
        (old,) = d.worker.registration.runtime_ids()
        await eventually(lambda: [set(ids) for ids, _ in fake.watchers] == [{old}])
        fake.delete_runtime(old)  # the next heartbeat hears 404 and registers again
        await eventually(lambda: d.worker.registration.runtime_ids() not in ([old], []))
        new = set(d.worker.registration.runtime_ids())
        await eventually(lambda: [set(ids) for ids, _ in fake.watchers] == [new], within=15)
        task_id = fake.queue_issue()
        await eventually(lambda: fake.tasks[task_id].status == "completed", within=15)


async def test_a_dropped_channel_leaves_polling_and_claims_each_task_once(tmp_path: Path) -> None:
    """Tasks queued while the channel is down are claimed by polling, each exactly once."""
    embedded = InProcess()
    async with (
        embedded_server(tmp_path / "server.db", in_process=embedded) as url,
        running_daemon(tmp_path, url, control=True, MULTICA_DAEMON_POLL_INTERVAL="300ms") as d,
    ):
        channel = d.worker.pickup.channel
        assert channel is not None
        with anyio.fail_after(15):
            await channel.connected.wait()
        await embedded.hub.close()
        ids = [await d.submit(_QUICK) for _ in range(6)]
        tasks = [await d.wait(task_id, within=30) for task_id in ids]
        claimed = d.metrics.tasks_claimed.labels("scripted")._value.get()
    assert [t["status"] for t in tasks] == ["completed"] * 6
    assert [t["complete_calls"] for t in tasks] == [1] * 6
    assert claimed == 6


async def test_a_server_without_the_route_leaves_the_daemon_polling(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that answers the upgrade with 404 leaves the daemon claiming by polling."""
    caplog.set_level(logging.INFO, "daemon.protocol.control")
    async with (
        server_without_websockets(tmp_path / "server.db") as url,
        running_daemon(tmp_path, url, control=True, MULTICA_DAEMON_POLL_INTERVAL="200ms") as d,
    ):
        for _ in range(3):
            task = await d.wait(await d.submit(_QUICK), within=15)
            assert task["status"] == "completed"
        await eventually(lambda: "control channel unavailable (HTTP 404)" in caplog.text)
        channel = d.worker.pickup.channel
        assert channel is not None
        assert not channel.connected.is_set()


@asynccontextmanager
async def server_without_websockets(db_path: Path) -> AsyncIterator[str]:
    """The reference server under uvicorn with WebSocket support off (as an older server)."""
    store = Store(db_path)
    config = uvicorn.Config(
        create_app(store, TOKEN), ws="none", log_config=None, lifespan="off", log_level="warning"
    )
    server = _Server(config)
    sock = _bind("127.0.0.1", 0)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            await server.listening.wait()
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
            server.should_exit = True
    finally:
        sock.close()
        store.close()
