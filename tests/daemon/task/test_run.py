"""One task's run, start to single report, with the scripted agent and the fake server."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import pytest

from backends.base import RunSpec
from backends.process import ProcessRun
from backends.scripted import Script, ScriptedBackend
from daemon.errors import PermanentServerError, TransientServerError
from daemon.protocol.models import Task
from daemon.task.recovery import RESUME_PROMPT
from daemon.testing import FakeTaskServer, settings_in, task, task_run

pytestmark = pytest.mark.anyio


async def run_until_the_agent_speaks(
    home: Path, server: FakeTaskServer, job: Task, then: Callable[[], None]
) -> None:
    """Run the task to its end; once its agent's transcript flows, `then` acts on the server."""
    run = task_run(job, ScriptedBackend(), server=server, settings=settings_in(home))
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run.run)
            await server.sending.wait()
            then()


async def test_a_completed_run_reports_complete_once_with_its_transcript(tmp_path: Path) -> None:
    """The agent's answer is reported once as `complete`, after its whole transcript."""
    server = FakeTaskServer()
    job = task(Script().text("working").result("done", session_id="s1").dumps())
    run = task_run(job, ScriptedBackend(), server=server, settings=settings_in(tmp_path))
    outcome = await run.run()
    assert outcome.status.value == "completed"
    [report] = server.reports[job.id]
    assert (report.kind, report.output, report.session_id) == ("complete", "done", "s1")
    assert [m["content"] for m in server.messages(job.id) if m["type"] == "text"] == ["working"]
    assert server.calls[-1].method == "send_report"


async def test_an_agent_failure_reports_fail_with_its_error(tmp_path: Path) -> None:
    """A failed result becomes one `fail` report carrying the agent's error."""
    server = FakeTaskServer()
    job = task(Script().result("", error="the build broke").exit(1).dumps())
    outcome = await task_run(
        job, ScriptedBackend(), server=server, settings=settings_in(tmp_path)
    ).run()
    assert outcome.status.value == "failed"
    [report] = server.reports[job.id]
    assert report.kind == "fail" and "the build broke" in report.error


async def test_a_cancel_on_the_server_stops_the_run_and_acknowledges_it(tmp_path: Path) -> None:
    """The status poll sees the task cancelled: the agent is stopped, the cancel acknowledged."""
    server = FakeTaskServer()
    job = task(Script().text("started").hang().dumps())
    await run_until_the_agent_speaks(
        tmp_path, server, job, then=lambda: server.set_status(job.id, "cancelled")
    )
    assert [r.kind for r in server.reports[job.id]] == ["cancel_ack"]
    assert server.count("task_status", job.id) >= 1


async def test_a_refused_start_fails_the_task_without_running_it(tmp_path: Path) -> None:
    """A start the server refuses (the task is no longer dispatched) runs no agent."""
    server = FakeTaskServer(status="cancelled")
    server.fail("start_task", PermanentServerError("start", "not dispatched", 409))
    job = task(Script().text("must not run").result("done").dumps())
    outcome = await task_run(
        job, ScriptedBackend(), server=server, settings=settings_in(tmp_path)
    ).run()
    [report] = server.reports[job.id]
    assert report.kind == "fail" and report.error.startswith("start task failed")
    assert outcome.status.value == "failed"
    assert server.messages(job.id) == []


async def test_a_task_gone_at_start_is_not_reported(tmp_path: Path) -> None:
    """A task the server forgot before it started ends without any terminal call."""
    server = FakeTaskServer()
    job = task(Script().result("done").dumps())
    server.forget(job.id)
    outcome = await task_run(
        job, ScriptedBackend(), server=server, settings=settings_in(tmp_path)
    ).run()
    assert outcome.report is None
    assert server.reports == {}


async def test_the_idle_watchdog_fails_a_silent_agent(tmp_path: Path) -> None:
    """An agent silent past the idle window is killed and the task fails as `idle_watchdog`."""
    server = FakeTaskServer()
    settings = settings_in(tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="300ms")
    job = task(Script().text("thinking").hang().dumps())
    with anyio.fail_after(20):
        outcome = await task_run(job, ScriptedBackend(), server=server, settings=settings).run()
    assert outcome.status.value == "idle_watchdog"
    [report] = server.reports[job.id]
    assert report.failure_reason == "idle_watchdog"


async def test_the_idle_watchdog_spares_an_agent_inside_a_tool_call(tmp_path: Path) -> None:
    """A tool call silent for longer than the idle window is not an idle agent."""
    server = FakeTaskServer()
    settings = settings_in(tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="300ms")
    job = task(Script().tool("Bash", seconds=1.2, output="ok").result("built").dumps())
    outcome = await task_run(job, ScriptedBackend(), server=server, settings=settings).run()
    assert outcome.status.value == "completed"
    assert server.reports[job.id][0].output == "built"


async def test_a_retry_after_the_watchdog_resumes_the_session(tmp_path: Path) -> None:
    """After an idle kill the next attempt resumes the agent's session with a short prompt."""
    server = FakeTaskServer()
    settings = settings_in(
        tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="300ms", MULTICA_AGENT_IDLE_RETRIES="1"
    )
    job = task(Script().emit("status", session_id="s-7").hang().dumps())
    run = task_run(job, ScriptedBackend(), server=server, settings=settings)
    with anyio.fail_after(20):
        outcome = await run.run()
    # The resumed scripted agent echoes its prompt under the session it resumed.
    [report] = server.reports[job.id]
    assert (report.kind, report.output, report.session_id) == ("complete", RESUME_PROMPT, "s-7")
    assert run.snapshot().retry == 1 and outcome.status.value == "completed"


async def test_the_wall_clock_cap_times_the_task_out(tmp_path: Path) -> None:
    """An agent still busy at `MULTICA_AGENT_TIMEOUT` is stopped and the task times out."""
    server = FakeTaskServer()
    settings = settings_in(tmp_path, MULTICA_AGENT_TIMEOUT="1s")
    job = task(Script().tool("Bash", seconds=60).dumps())
    with anyio.fail_after(20):
        outcome = await task_run(job, ScriptedBackend(), server=server, settings=settings).run()
    assert outcome.status.value == "timeout"
    [report] = server.reports[job.id]
    assert report.failure_reason == "timeout" and "wall-clock limit of 1s" in report.error


async def test_a_complete_the_server_cannot_take_waits_in_the_outbox(tmp_path: Path) -> None:
    """A transient failure of the terminal call keeps the `complete` in the outbox on disk."""
    server = FakeTaskServer()
    server.fail("send_report", TransientServerError("complete", "connection refused"))
    settings = settings_in(tmp_path)
    job = task(Script().result("done").dumps())
    outcome = await task_run(job, ScriptedBackend(), server=server, settings=settings).run()
    assert outcome.status.value == "completed"
    assert server.reports == {}
    [kept] = list((settings.state_dir / "outbox").iterdir())
    assert job.id in kept.name and '"complete"' in kept.read_text()


async def test_a_task_forgotten_mid_run_stops_without_a_report(tmp_path: Path) -> None:
    """The status poll hears the task is gone: the agent is stopped and nothing is reported."""
    server = FakeTaskServer()
    job = task(Script().text("started").hang().dumps())
    await run_until_the_agent_speaks(tmp_path, server, job, then=lambda: server.forget(job.id))
    assert server.reports == {}


class _SpecKeeper(ScriptedBackend):
    """The scripted agent, keeping the spec of every start."""

    def __init__(self) -> None:
        super().__init__()
        self.specs: list[RunSpec] = []

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[ProcessRun]:
        self.specs.append(spec)
        return super().start(spec)


async def test_a_chatty_agent_is_read_on_its_transcripts_beat(tmp_path: Path) -> None:
    """The agent's reads hold for the beat its transcript flushes on (held_reads.py)."""
    backend = _SpecKeeper()
    job = task(Script().text("working").result("done").dumps())
    run = task_run(job, backend, server=FakeTaskServer(), settings=settings_in(tmp_path))
    await run.run()
    [spec] = backend.specs
    assert spec.read_beat is run.reporter.transcript.beat


@pytest.mark.parametrize(
    "window", [{"MULTICA_AGENT_IDLE_WATCHDOG": "4s"}, {"MULTICA_AGENT_TOOL_WATCHDOG": "2s"}]
)
async def test_under_a_short_watchdog_window_every_line_is_read_as_it_comes(
    tmp_path: Path, window: dict[str, str]
) -> None:
    backend = _SpecKeeper()
    job = task(Script().text("working").result("done").dumps())
    settings = settings_in(tmp_path, **window)
    await task_run(job, backend, server=FakeTaskServer(), settings=settings).run()
    [spec] = backend.specs
    assert spec.read_beat is None


async def test_an_agent_printing_faster_than_the_beat_is_not_idle(tmp_path: Path) -> None:
    """Its lines read on the beat would stamp its activity once a beat (0.5 s): a 300 ms idle
    window would kill it mid-sentence."""
    server = FakeTaskServer()
    settings = settings_in(tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="300ms")
    script = Script()
    for n in range(30):
        script = script.text(f"line {n}").sleep(0.05)
    job = task(script.result("done").dumps())
    with anyio.fail_after(20):
        outcome = await task_run(job, ScriptedBackend(), server=server, settings=settings).run()
    assert outcome.status.value == "completed"
    assert len(server.messages(job.id)) == 30
