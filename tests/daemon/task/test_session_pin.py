"""The run pins its agent's session on the task once, in the background, bounded."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from backends.scripted import Script, ScriptedBackend
from daemon.errors import TransientServerError
from daemon.task.session_pin import SessionPin
from daemon.testing import FakeTaskServer, settings_in, task, task_run
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


async def test_a_run_pins_the_session_its_agent_names_once(tmp_path: Path) -> None:
    """The session the agent names (three times) is pinned once, with the run's work dir,
    before the terminal report."""
    server = FakeTaskServer()
    script = (
        Script()
        .emit("status", content="session s-1", session_id="s-1")
        .text("working")
        .emit("status", content="still s-1", session_id="s-1")
        .result("done", session_id="s-1")
    )
    job = task(script.dumps())
    outcome = await task_run(
        job, ScriptedBackend(), server=server, settings=settings_in(tmp_path)
    ).run()
    [report] = server.reports[job.id]
    assert server.pins[job.id] == [("s-1", report.work_dir)]
    assert outcome.status.value == "completed" and report.work_dir
    methods = [c.method for c in server.calls]
    assert methods.index("pin_session") < methods.index("send_report")


async def test_a_failed_pin_is_logged_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that refuses the pin costs a warning, not the task."""
    server = FakeTaskServer()
    server.fail("pin_session", TransientServerError("session", "503", 503))
    job = task(Script().emit("status", session_id="s-2").result("done").dumps())
    with caplog.at_level(logging.WARNING, logger="daemon.task.session_pin"):
        outcome = await task_run(
            job, ScriptedBackend(), server=server, settings=settings_in(tmp_path)
        ).run()
    assert outcome.status.value == "completed"
    assert server.count("pin_session", job.id) == 1
    assert "pinning session s-2 failed" in caplog.text


class _Silent:
    """A server whose pin is never answered."""

    def __init__(self) -> None:
        self.asked = anyio.Event()

    async def pin_session(self, task_id: str, session_id: str, work_dir: str) -> None:
        self.asked.set()
        await anyio.sleep_forever()


async def test_a_pin_never_holds_up_the_caller_and_gives_up_at_its_bound() -> None:
    """`learned` returns at once; an unanswered pin is abandoned after its bound."""
    server = _Silent()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            pin = SessionPin(server, "t-1", "/w", tg, within=0.05)  # type: ignore[arg-type]
            pin.learned("s-3")
            assert not server.asked.is_set()  # started in the background, not yet run
            await server.asked.wait()
        # The group ended: the pin gave up at its bound.


async def test_a_codex_session_is_pinned_once_its_rollout_exists(tmp_path: Path) -> None:
    """A session that is not yet resumable waits for its rollout; one that never gets one by
    the run's end is not pinned."""
    server = FakeTaskServer()
    rollout = tmp_path / "rollout-x-th-1.jsonl"
    looks: list[str] = []

    def resumable(thread: str) -> bool:
        looks.append(thread)
        return rollout.exists()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            pin = SessionPin(server, "t-1", "/w", tg, resumable)
            pin.learned("th-1")
            await eventually(lambda: len(looks) >= 3)
            assert server.pins == {}
            rollout.write_text("{}")
            await eventually(lambda: bool(server.pins))
            assert server.pins == {"t-1": [("th-1", "/w")]}
        async with anyio.create_task_group() as tg:
            never = SessionPin(server, "t-2", "/w", tg, lambda _: False)
            never.learned("th-2")
            never.run_ended()
    assert "t-2" not in server.pins
