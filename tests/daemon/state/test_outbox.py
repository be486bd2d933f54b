"""The durable outbox: reports kept on disk, re-sent until the real server takes or refuses them."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from backends.base import Usage
from daemon.cli.tasks_api import TasksApi
from daemon.ops.metrics import Metrics
from daemon.protocol.client import ServerClient, make_http_client
from daemon.protocol.reports import TerminalReport, UsageEntry
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.runtime_models import RuntimeInfo
from daemon.state.outbox import Leftover, Outbox
from tests.fakes.chaos_proxy import ChaosProxy, chaos_proxy
from tests.fakes.multica_server import multica_server
from tests.helpers import TOKEN, embedded_server, eventually, running_daemon, server_client

pytestmark = pytest.mark.anyio

FAST = RetryPolicy((0.05, 0.1))
SCRIPT = {
    "steps": [
        {"text": "one"},
        {"tool": {"name": "Bash", "call_id": "c1", "input": {"command": "ls"}, "output": "a"}},
        {"text": "two"},
        {"sleep": 1.0},  # the transcript is flushed before the result
        {"result": {"output": "the answer", "session_id": "s-1"}},
    ]
}


def complete(task_id: str, **extra: Any) -> Leftover:
    report = TerminalReport(kind="complete", output="done", session_id="s", work_dir="/w")
    return Leftover(task_id=task_id, report=report, **extra)


def stored(outbox: Outbox) -> dict[str, dict[str, Any]]:
    """The outbox files as JSON, by file name."""
    return {p.name: json.loads(p.read_text()) for p in sorted(outbox.directory.iterdir())}


@asynccontextmanager
async def server_and_proxy(tmp_path: Path) -> AsyncIterator[tuple[TasksApi, ChaosProxy]]:
    """The embedded server, a chaos proxy in front of it, and the task API straight to it."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        chaos_proxy(url) as proxy,
        server_client(url) as direct,
    ):
        yield TasksApi(direct), proxy


@asynccontextmanager
async def client_for(url: str) -> AsyncIterator[ServerClient]:
    """A daemon-side client with short retries."""
    async with make_http_client(url, TOKEN, "test") as http:
        yield ServerClient(http, policy=FAST, report_policy=FAST)


async def claimed_task(api: TasksApi, client: ServerClient) -> str:
    """A task claimed and started by a registered runtime, as a daemon would have it."""
    task_id = str((await api.create_task("x", backend="scripted"))["id"])
    scripted = RuntimeInfo(name="s", type="scripted", version="1")
    answer = await client.register("default", "d-1", "host", "1", [scripted])
    claimed = await client.claim("d-1", [answer.runtimes[0].id], 1)
    assert [t.id for t in claimed] == [task_id]
    await client.start_task(task_id)
    return task_id


def test_put_writes_one_file_per_task_atomically(tmp_path: Path) -> None:
    """One JSON file per task, a later put replaces it, and no temporary file is left."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    outbox.put(complete("t-1"))
    outbox.put(complete("t-2"))
    failed = TerminalReport(kind="fail", error="e", failure_reason="cancelled")
    outbox.put(Leftover(task_id="t-1", report=failed))
    files = stored(outbox)
    assert sorted(files) == ["t-1.json", "t-2.json"]
    assert files["t-1.json"]["report"]["kind"] == "fail"
    assert outbox.depth() == 2
    assert {r.task_id: r.kind for r in outbox.reports()} == {"t-1": "fail", "t-2": "complete"}


def test_ids_differing_only_in_unsafe_characters_keep_their_own_files(tmp_path: Path) -> None:
    """`a.b` and `a_b` are two reports, and `../x` stays inside the outbox directory."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    for task_id in ("a.b", "a_b", "../x"):
        outbox.put(complete(task_id))
    assert sorted(r.task_id for r in outbox.reports()) == ["../x", "a.b", "a_b"]
    assert len(stored(outbox)) == 3
    outbox.remove("a.b")
    assert sorted(r.task_id for r in outbox.reports()) == ["../x", "a_b"]


def test_report_with_transcript_and_usage_reads_back_equal(tmp_path: Path) -> None:
    """Transcript messages and usage kept with a report come back exactly as they were put."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    report = complete(
        "t-1",
        messages=({"seq": 1, "type": "text", "tool": "", "content": "hi", "output": ""},),
        usage=(
            {
                "provider": "p",
                "model": "m",
                "input_tokens": 3,
                "output_tokens": 4,
                "cache_read_tokens": 0,
                "cache_write_tokens": 0,
            },
        ),
    )
    outbox.put(report)
    assert Outbox(tmp_path / "outbox", Metrics()).reports() == [report]


def test_depth_is_published_as_a_metric(tmp_path: Path) -> None:
    """The outbox depth gauge follows puts and removes, and starts at what is on disk."""
    metrics = Metrics()
    outbox = Outbox(tmp_path / "outbox", metrics)
    outbox.put(complete("t-1"))
    outbox.put(complete("t-2"))
    outbox.remove("t-1")
    assert metrics.registry.get_sample_value("agent_daemon_outbox_depth") == 1
    again = Metrics()
    Outbox(tmp_path / "outbox", again)
    assert again.registry.get_sample_value("agent_daemon_outbox_depth") == 1


def test_unreadable_file_is_set_aside_and_the_rest_still_read(tmp_path: Path) -> None:
    """A damaged file is renamed `.bad` (out of the depth); good reports still come back."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    outbox.put(complete("t-1"))
    (outbox.directory / "t-2.json").write_text('{"task_id": "t-2", "kind": "compl')
    (outbox.directory / "t-3.json").write_text(
        json.dumps({"task_id": "t-3", "kind": "complete", "body": {"output": "x", "bad": 1}})
    )
    assert [r.task_id for r in outbox.reports()] == ["t-1"]
    assert sorted(p.name for p in outbox.directory.iterdir()) == ["t-1.json", "t-2.bad", "t-3.bad"]
    assert outbox.depth() == 1


async def test_permanent_refusal_removes_the_report(tmp_path: Path) -> None:
    """A report the real server refuses for good (404 task not found) is dropped, not retried."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    outbox.put(complete("no-such-task"))
    async with embedded_server(tmp_path / "server.db") as url, client_for(url) as client:
        left = await outbox.flush(client)
    assert left == 0
    assert stored(outbox) == {}


async def test_transient_failure_keeps_the_report_unchanged(tmp_path: Path) -> None:
    """While the server answers 500 the flush leaves the file exactly as it was."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    async with server_and_proxy(tmp_path) as (api, proxy), client_for(proxy.url) as client:
        task_id = await claimed_task(api, client)
        outbox.put(complete(task_id))
        before = stored(outbox)
        await proxy.set_mode("500")
        left = await outbox.flush(client)
        task = await api.get_task(task_id)
    assert left == 1
    assert stored(outbox) == before
    assert task["status"] == "running" and task["complete_calls"] == 0


async def test_delivered_parts_are_forgotten_before_the_rest(tmp_path: Path) -> None:
    """Transcript taken, `complete` refused with a 500: the file keeps only the `complete`;
    the next flush delivers it and the transcript is stored once."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    messages = tuple(
        {"seq": i, "type": "text", "tool": "", "content": f"m{i}", "output": ""}
        for i in range(1, 2501)  # three batches
    )
    async with server_and_proxy(tmp_path) as (api, proxy), client_for(proxy.url) as client:
        task_id = await claimed_task(api, client)
        outbox.put(complete(task_id, messages=messages))
        await proxy.set_mode("500", only={"complete"})
        assert await outbox.flush(client) == 1
        kept = outbox.reports()
        await proxy.set_mode("pass")
        assert await outbox.flush(client) == 0
        task = await api.get_task(task_id)
        transcript = await api.messages(task_id)
    assert [(r.kind, r.messages) for r in kept] == [("complete", ())]
    assert task["status"] == "completed" and task["complete_calls"] == 1
    assert [m["seq"] for m in transcript] == list(range(1, 2501))
    assert proxy.count("messages") == 3


async def test_transient_complete_failure_stays_a_complete_and_is_delivered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`complete` failing after its retries goes to the outbox as a `complete` (never a `fail`)
    and the background re-send delivers it once the server takes it."""
    caplog.set_level(logging.INFO, logger="daemon.state.outbox")
    async with (
        server_and_proxy(tmp_path) as (api, proxy),
        running_daemon(tmp_path, proxy.url, report_policy=FAST, outbox_interval=0.3) as d,
    ):
        await proxy.set_mode("500", only={"complete"})
        task_id = str((await api.create_task(json.dumps(SCRIPT), backend="scripted"))["id"])
        await eventually(lambda: d.worker.outbox.depth() == 1, within=20)
        kept = d.worker.outbox.reports()
        waiting = await api.get_task(task_id)
        await proxy.set_mode("pass")
        await eventually(lambda: d.worker.outbox.depth() == 0, within=10)
        task = await api.get_task(task_id)
    assert [(r.kind, r.report and r.report.output) for r in kept] == [("complete", "the answer")]
    assert (waiting["status"], waiting["complete_calls"], waiting["fail_calls"]) == (
        "running",
        0,
        0,
    )
    assert task["status"] == "completed" and task["output"] == "the answer"
    assert (task["complete_calls"], task["fail_calls"]) == (1, 0)
    # The first try and FAST's two retries, then each re-send the outbox made (on its own
    # clock) before the proxy passed again, which it logs as still not delivered.
    resent = sum("still not delivered" in r.getMessage() for r in caplog.records)
    assert proxy.count("complete", mode="500") == 3 + resent


async def test_report_survives_a_restart_and_is_delivered_at_the_next_start(
    tmp_path: Path,
) -> None:
    """A `complete` kept in the outbox when the daemon stops is delivered by the next daemon
    on the same state dir as it starts — before recover-orphans could fail the task."""
    async with server_and_proxy(tmp_path) as (api, proxy):
        async with running_daemon(tmp_path, proxy.url, report_policy=FAST) as d:
            await proxy.set_mode("500", only={"complete"})
            task_id = str((await api.create_task(json.dumps(SCRIPT), backend="scripted"))["id"])
            await eventually(lambda: d.worker.outbox.depth() == 1, within=20)
        files = (tmp_path / "state/outbox").iterdir()
        kinds = [json.loads(f.read_text())["report"]["kind"] for f in files]
        await proxy.set_mode("pass")
        # A long re-send period: only the start-up flush can deliver it.
        async with running_daemon(tmp_path, proxy.url, outbox_interval=3600) as again:
            left = again.worker.outbox.depth()
            task = await api.get_task(task_id)
            transcript = await api.messages(task_id)
    assert kinds == ["complete"]
    assert left == 0
    assert task["status"] == "completed" and task["output"] == "the answer"
    assert (task["complete_calls"], task["fail_calls"]) == (1, 0)
    assert [m["seq"] for m in transcript] == [1, 2, 3, 4]


def test_files_written_before_the_format_version_still_load(tmp_path: Path) -> None:
    """Version 1 files (`kind` and `body` side by side), as the daemon wrote them before the
    format was versioned, load as the same reports and are re-sent unchanged."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    for old in sorted((Path(__file__).parent / "data").glob("v1-*.json")):
        (outbox.directory / old.name.removeprefix("v1-")).write_bytes(old.read_bytes())
    loaded = {r.task_id: r for r in outbox.reports()}
    assert sorted(loaded) == ["task-old-1", "task-old-2", "task-old-3", "task-old-4"]
    assert loaded["task-old-1"].report == TerminalReport(
        kind="complete", output="the answer", session_id="s-1", work_dir="/w/task-old-1"
    )
    assert loaded["task-old-1"].messages == (
        {"seq": 3, "type": "text", "tool": "", "content": "hi", "output": ""},
    )
    usage = Usage("anthropic", "sonnet", 10, 20, 30, 40)
    assert loaded["task-old-1"].usage == (UsageEntry.from_usage(usage),)
    assert loaded["task-old-2"].report == TerminalReport(
        kind="fail", error="boom", failure_reason="agent_error", work_dir="/w/task-old-2"
    )
    assert loaded["task-old-3"].report == TerminalReport(kind="cancel_ack")
    assert loaded["task-old-4"].report is None
    assert loaded["task-old-4"].messages[0]["input"] == {"command": "ls"}
    assert outbox.depth() == 4


def test_files_carry_their_format_version(tmp_path: Path) -> None:
    """A stored report says which format it is in, so a later daemon knows how to read it."""
    outbox = Outbox(tmp_path / "outbox", Metrics())
    outbox.put(complete("t-1"))
    assert stored(outbox)["t-1.json"]["format"] == 2


def dropped(metrics: Metrics, reason: str) -> float | None:
    name = "agent_daemon_transcript_messages_dropped_total"
    return metrics.registry.get_sample_value(name, {"reason": reason})


async def test_a_message_the_server_refuses_costs_only_itself(tmp_path: Path) -> None:
    """A leftover transcript holding one message the real server refuses (a seq past SQLite's
    range: 400): the rest is stored, the report delivered, the refusal counted."""
    metrics = Metrics()
    outbox = Outbox(tmp_path / "outbox", metrics)
    messages = [{"seq": i, "type": "text", "content": f"m{i}"} for i in range(1, 11)]
    messages.insert(4, {"seq": 2**63, "type": "text", "content": "poison"})
    async with (
        embedded_server(tmp_path / "server.db") as url,
        client_for(url) as client,
        server_client(url) as direct,
    ):
        api = TasksApi(direct)
        task_id = await claimed_task(api, client)
        outbox.put(complete(task_id, messages=tuple(messages)))
        assert await outbox.flush(client) == 0
        task = await api.get_task(task_id)
        transcript = await api.messages(task_id)
    assert [m["seq"] for m in transcript] == list(range(1, 11))
    assert task["status"] == "completed"
    assert dropped(metrics, "refused") == 1


async def test_a_leftover_batch_whose_answer_is_lost_is_not_sent_twice(tmp_path: Path) -> None:
    """Against a server that stores duplicates (Multica), a leftover batch whose answer was
    lost is given up and counted, never re-sent: each seq is stored once."""
    metrics = Metrics()
    outbox = Outbox(tmp_path / "outbox", metrics)
    messages = tuple({"seq": i, "type": "text", "content": f"m{i}"} for i in range(1, 6))
    async with multica_server() as fake, client_for(fake.url) as client:
        task_id = fake.queue_issue("issue-1")
        outbox.put(complete(task_id, messages=messages))
        fake.drop_answers("messages", 1)
        assert await outbox.flush(client) == 0
        rows = fake.messages_of(task_id)
    assert [m["seq"] for m in rows] == [1, 2, 3, 4, 5]
    assert dropped(metrics, "unconfirmed") == 5
