"""A daemon killed mid-run, against the Multica-faithful server: the run had pinned its
session, so the server's retry resumes it in the same work directory."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import anyio
import pytest

from backends.process import TRACKING_ENV, signal_group_of, tagged
from backends.scripted import Script
from tests.fakes.multica_routes import FakeTask
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import daemon_env, daemon_process, eventually

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="crash recovery reads /proc"),
]

SESSION = "sess-7f3a"
# Names its session and works on until killed; resumed, it ends at once, naming the session.
SCRIPT = (
    Script()
    .end_if_resumed()
    .emit("status", content=f"session {SESSION}", session_id=SESSION)
    .text("working")
    .hang()
    .dumps()
)


async def test_a_retry_after_a_crash_resumes_the_pinned_session_in_the_same_work_dir(
    tmp_path: Path,
) -> None:
    """The run pins its session once; SIGKILL; the restarted daemon recovers the orphan, and
    the server's retry is claimed with that session and work dir, which it resumes."""
    log = tmp_path / "daemon.log"
    async with multica_server() as fake:
        env = daemon_env(tmp_path, fake.url)
        task_id = ""
        try:
            async with daemon_process(env, log=log) as first:
                task_id = fake.queue_comment(SCRIPT)
                await eventually(lambda: _said(fake.messages_of(task_id), "working"), within=30)
                await eventually(lambda: bool(_pins(fake, task_id)), within=10)
                first.kill()
                with anyio.fail_after(10):
                    assert await first.wait() == -signal.SIGKILL
            [pin] = _pins(fake, task_id)
            work_dir = pin["work_dir"]
            assert pin == {"session_id": SESSION, "work_dir": work_dir} and work_dir
            assert fake.tasks[task_id].status == "running"

            async with daemon_process(env, log=log):
                await eventually(lambda: _retry_of(fake, task_id) is not None, within=30)
                retry = _retry_of(fake, task_id)
                assert retry is not None
                done = await fake.finished(retry.id, within=30)
        finally:
            for leftover in tagged(TRACKING_ENV, task_id) if task_id else []:
                signal_group_of(leftover, signal.SIGKILL)
    failed = fake.tasks[task_id]
    assert (failed.status, failed.failure_reason) == ("failed", "runtime_recovery")
    assert (failed.session_id, failed.work_dir) == (SESSION, work_dir)
    assert done.claimed is not None
    assert done.claimed["prior_session_id"] == SESSION
    assert done.claimed["prior_work_dir"] == work_dir
    assert (done.status, done.output) == ("completed", f"resumed {SESSION}")
    assert (done.session_id, done.work_dir) == (SESSION, work_dir)
    assert len(_pins(fake, task_id)) == 1


def _pins(fake: MulticaFake, task_id: str) -> list[dict[str, str]]:
    return [r.body for r in fake.seen("session") if f"/tasks/{task_id}/" in r.path]


def _retry_of(fake: MulticaFake, task_id: str) -> FakeTask | None:
    return next((t for t in fake.tasks.values() if t.parent_id == task_id), None)


def _said(messages: list[dict[str, object]], text: str) -> bool:
    return any(m.get("content") == text for m in messages)
