"""One task's error is that task's: a failure at any step of a run fails that task, reported
once, with an incident line, while the daemon and the tasks beside it carry on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from backends.base import AgentRun, Message, RunResult, RunSpec
from backends.scripted import ScriptedBackend
from daemon.cli.tasks_api import TasksApi
from daemon.protocol.client import ServerClient
from daemon.protocol.reports import TerminalReport
from daemon.testing import task_processes
from tests.helpers import (
    embedded_server,
    full_disk,
    incidents,
    running_daemon,
    server_client,
)

pytestmark = pytest.mark.anyio

BLOCKED_WORKSPACE = "blocked"
"""A workspace whose directory is taken by a regular file: its work dirs cannot be made."""
FULL_WORKSPACE = "full"
"""A workspace whose directory is a full file system: its instructions cannot be written."""
DONE = {"steps": [{"text": "working"}, {"result": {"output": "done"}}]}
SLOW = {"steps": [{"text": "still here"}, {"sleep": 2.0}, {"result": {"output": "outlived them"}}]}


class BrokenStart:
    """A backend whose start raises what no backend should (a defect, not an OS error)."""

    name = "broken"

    async def detect(self) -> str | None:
        return "1"

    @asynccontextmanager
    async def start(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        raise RuntimeError("the backend could not build its command line")
        yield  # pragma: no cover - makes this an async generator


class _Choking:
    """A real scripted agent whose message stream breaks after its first message."""

    def __init__(self, agent: AgentRun) -> None:
        self._agent = agent

    @property
    def pid(self) -> int:
        return self._agent.pid

    async def messages(self) -> AsyncIterator[Message]:
        async for message in self._agent.messages():
            yield message
            raise ValueError("the transcript parser choked")

    def pending(self) -> int:
        return self._agent.pending()

    async def close_stdin(self) -> None:
        await self._agent.close_stdin()

    async def result(self) -> RunResult:
        return await self._agent.result()


class ChokingDrain:
    """The scripted backend under another name, its drain breaking mid-run."""

    name = "choking"

    def __init__(self) -> None:
        self._inner = ScriptedBackend(self.name)

    async def detect(self) -> str | None:
        return await self._inner.detect()

    @asynccontextmanager
    async def start(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        async with self._inner.start(spec) as agent:
            yield _Choking(agent)


def failing_calls(start: set[str], report_once: set[str]) -> type[ServerClient]:
    """The real client, except that the start ack of `start` tasks raises, and so does the
    first terminal report of `report_once` tasks (errors no client should raise)."""

    class StepFailures(ServerClient):
        async def start_task(self, task_id: str) -> None:
            if task_id in start:
                raise RuntimeError("the start acknowledgement broke")
            await super().start_task(task_id)

        async def send_report(
            self, task_id: str, report: TerminalReport, *, retry: bool = True
        ) -> None:
            if task_id in report_once:
                report_once.discard(task_id)
                raise RuntimeError("the report call broke")
            await super().send_report(task_id, report, retry=retry)

    return StepFailures


async def test_a_failure_at_each_step_fails_only_that_task(tmp_path: Path) -> None:
    """Work dir (a file in its way), instructions (ENOSPC on a full disk), start ack, spawn,
    drain and report each fail in one task; each is reported once (the report's own failure is
    delivered later from the outbox), logged as an incident, and a task running all along
    completes, as does one claimed afterwards."""
    async with embedded_server(tmp_path / "server.db") as url, server_client(url) as user:
        api = TasksApi(user)
        for workspace in (BLOCKED_WORKSPACE, FULL_WORKSPACE):
            created = await user.post("/api/workspaces", json={"id": workspace, "name": workspace})
            assert created.status_code == 201
        slow = await api.create_task(json.dumps(SLOW), backend="scripted")

        async def submit(backend: str, **options: object) -> str:
            task = await api.create_task(json.dumps(DONE), backend=backend, **options)  # type: ignore[arg-type]
            return str(task["id"])

        ids = {
            "workdir": await submit("scripted", workspace_id=BLOCKED_WORKSPACE),
            "instructions": await submit(
                "scripted", workspace_id=FULL_WORKSPACE, agent={"instructions": "be brief"}
            ),
            "start": await submit("scripted"),
            "spawn": await submit("broken"),
            "drain": await submit("choking"),
            "report": await submit("scripted"),
        }
        client_type = failing_calls({ids["start"]}, {ids["report"]})
        backends = {"broken": (BrokenStart(), "1"), "choking": (ChokingDrain(), "1")}
        (tmp_path / "workspaces").mkdir()
        (tmp_path / "workspaces" / BLOCKED_WORKSPACE).write_text("a file, not a directory\n")
        with full_disk(tmp_path / "workspaces" / FULL_WORKSPACE):
            async with running_daemon(
                tmp_path,
                url,
                backends=backends,  # type: ignore[dict-item]
                client_type=client_type,
                outbox_interval=0.2,
                MULTICA_MAX_CONCURRENT_TASKS="8",
            ) as d:
                tasks = {step: await d.wait(task_id) for step, task_id in ids.items()}
                slow_end = await d.wait(str(slow["id"]))
                after = await d.wait(await d.submit(DONE))
                status = d.worker.status
                depth = d.worker.outbox.depth()
                lines = incidents(d)

    failed = {step: t for step, t in tasks.items() if step != "report"}
    assert {step: t["status"] for step, t in failed.items()} == dict.fromkeys(failed, "failed")
    assert {step: (t["fail_calls"], t["complete_calls"]) for step, t in failed.items()} == (
        dict.fromkeys(failed, (1, 0))
    )
    errors = {step: t["error"] for step, t in failed.items()}
    assert errors["workdir"].startswith("could not prepare the work directory: [Errno 17]")
    assert errors["instructions"].startswith(
        "could not prepare the work directory: [Errno 28] No space left on device"
    )
    assert errors["start"] == "internal error: RuntimeError: the start acknowledgement broke"
    assert errors["spawn"] == (
        "internal error: RuntimeError: the backend could not build its command line"
    )
    assert errors["drain"] == "internal error: ValueError: the transcript parser choked"
    # The report that raised stays a `complete` and goes out once from the outbox.
    report = tasks["report"]
    assert (report["status"], report["output"]) == ("completed", "done")
    assert (report["complete_calls"], report["fail_calls"]) == (1, 0)
    assert (slow_end["status"], slow_end["output"]) == ("completed", "outlived them")
    assert after["status"] == "completed"
    assert (status, depth) == ("running", 0)
    by_task = {line["task_id"]: line for line in lines}
    scopes = {step: by_task[ids[step]]["scope"] for step in failed}
    assert scopes == {
        "workdir": "prepare",
        "instructions": "prepare",
        "start": "internal",
        "spawn": "internal",
        "drain": "internal",
    }
    assert all(by_task[ids[s]]["action"] == "fail" for s in failed)
    assert all(by_task[ids[s]]["error"] == errors[s] for s in failed)
    assert len(lines) == len(failed)
    assert task_processes(ids["drain"]) == []


async def test_a_workspaces_root_under_a_file_fails_each_task_not_the_daemon(
    tmp_path: Path,
) -> None:
    """With the workspaces root below a regular file (a directory that cannot be made) every
    task fails with that error, one after another, and the daemon keeps claiming."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be\n")
    async with embedded_server(tmp_path / "server.db") as url:
        root = str(blocker / "workspaces")
        async with running_daemon(tmp_path, url, MULTICA_WORKSPACES_ROOT=root) as d:
            first = await d.wait(await d.submit(DONE))
            second = await d.wait(await d.submit(DONE))
            status = d.worker.status
            lines = incidents(d)
    for task in (first, second):
        assert task["status"] == "failed"
        # The directory that cannot be made is the file itself: EEXIST, naming it.
        assert task["error"] == (
            f"could not prepare the work directory: [Errno 17] File exists: '{blocker}'"
        )
    assert status == "running"
    assert [(line["scope"], line["action"]) for line in lines] == [("prepare", "fail")] * 2
