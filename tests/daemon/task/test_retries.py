"""A task's attempts and retries: one agent after another, ending in one `Ending`."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from backends.claude import ClaudeBackend
from backends.process.identity import AgentUser
from backends.scripted import Script, ScriptedBackend
from daemon.config import Settings
from daemon.protocol.retry import RetryPolicy
from daemon.task.outcome import Ending
from daemon.task.retries import Retries
from daemon.task.transcript import Transcript
from daemon.testing import FakeTaskServer, retries, run_spec, settings_in, task, transcript
from tests.fakes.agent_cli import NEW_SHAPE, euids_of, plant_cli, write_cli

pytestmark = pytest.mark.anyio

IDLE = {"MULTICA_AGENT_IDLE_WATCHDOG": "300ms"}


async def run_script(home: Path, script: Script, **env: str) -> tuple[Ending, Retries, Transcript]:
    """Run the attempts of one scripted task; its ending, the attempts and its transcript."""
    settings: Settings = settings_in(home, **env)
    job = task(script.dumps())
    work_dir = home / "work"
    work_dir.mkdir(exist_ok=True)
    told = transcript(FakeTaskServer(), job.id)
    runs = retries(ScriptedBackend(), settings, job.id, transcript=told)
    with anyio.fail_after(20):
        ending = await runs.run(run_spec(job, work_dir, settings))
    return ending, runs, told


async def test_an_answer_ends_the_attempts_with_the_result(tmp_path: Path) -> None:
    """An agent that answers ends the loop after one attempt with its final message."""
    ending, runs, _ = await run_script(tmp_path, Script().result("42", session_id="s1"))
    assert ending.final is not None and ending.final.output == "42"
    assert ending.session_id == "s1" and not ending.error
    assert runs.retry == 0


async def test_a_stop_before_the_start_runs_no_agent(tmp_path: Path) -> None:
    """Stopped before its first attempt, the loop ends with the reason and no process."""
    settings = settings_in(tmp_path)
    job = task(Script().text("must not run").dumps())
    runs = retries(
        ScriptedBackend(), settings, job.id, transcript=transcript(FakeTaskServer(), job.id)
    )
    runs.stop("shutdown")
    ending = await runs.run(run_spec(job, tmp_path, settings))
    assert ending.stopped == "shutdown"
    assert runs.pid is None


async def test_an_agent_that_cannot_start_ends_with_the_spawn_error(tmp_path: Path) -> None:
    """A work directory that does not exist fails the spawn; the ending says so."""
    settings = settings_in(tmp_path)
    job = task(Script().result("done").dumps())
    runs = retries(
        ScriptedBackend(), settings, job.id, transcript=transcript(FakeTaskServer(), job.id)
    )
    ending = await runs.run(run_spec(job, tmp_path / "missing", settings))
    assert ending.error and ending.final is None


async def test_without_retries_an_idle_kill_fails_as_idle_watchdog(tmp_path: Path) -> None:
    """With no retries left the watchdog's verdict ends the task as `idle_watchdog`."""
    ending, runs, _ = await run_script(tmp_path, Script().text("hi").hang(), **IDLE)
    assert ending.failure_reason == "idle_watchdog"
    assert "idle" in ending.error
    assert runs.retry == 0


async def test_a_run_without_session_or_tool_calls_is_retried_fresh(tmp_path: Path) -> None:
    """No session and no side effects: the same prompt runs again, once per retry allowed."""
    ending, runs, told = await run_script(
        tmp_path, Script().text("again").hang(), **IDLE, MULTICA_AGENT_IDLE_RETRIES="1"
    )
    assert [m["content"] for m in told.pending()] == ["again", "again"]
    assert runs.retry == 1
    assert ending.failure_reason == "idle_watchdog" and "not retried" not in ending.error


async def test_tool_calls_without_a_session_are_not_retried(tmp_path: Path) -> None:
    """A tool ran and nothing can be resumed: a fresh start could repeat it, so no retry."""
    script = Script().tool("Bash", input={"command": "make"}, output="ok").hang()
    ending, runs, _ = await run_script(tmp_path, script, **IDLE, MULTICA_AGENT_IDLE_RETRIES="2")
    assert runs.retry == 0
    assert "not retried: tool calls ran and there is no session to resume" in ending.error


async def test_unrecognised_output_fails_as_unknown_and_is_not_retried(tmp_path: Path) -> None:
    """Only unknown lines within the first-output budget: failed `agent_error.unknown`, naming
    the CLI, its version and the first line, with retries left unused."""
    cli = write_cli(tmp_path / "claude", "2.1.400 (Claude Code)", NEW_SHAPE, linger=60)
    backend = ClaudeBackend(str(cli))
    backend.version = "2.1.400"
    settings = settings_in(
        tmp_path, MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT="300ms", MULTICA_AGENT_IDLE_RETRIES="2"
    )
    job = task("hello")
    runs = retries(backend, settings, job.id, transcript=transcript(FakeTaskServer(), job.id))
    with anyio.fail_after(20):
        ending = await runs.run(run_spec(job, tmp_path, settings))
    assert ending.failure_reason == "agent_error.unknown"
    assert "claude 2.1.400" in ending.error
    assert NEW_SHAPE[0] in ending.error
    assert runs.retry == 0


async def test_the_state_says_starting_running_in_a_tool_and_retrying(tmp_path: Path) -> None:
    """Before an agent runs, inside a tool call, and in the backoff before a resume: each
    state is what operations see, and a resumed retry is counted."""
    settings = settings_in(tmp_path, **IDLE, MULTICA_AGENT_IDLE_RETRIES="1")
    script = Script().emit("status", session_id="s1").tool("Bash", seconds=0.5).hang()
    job = task(script.dumps())
    backoff = RetryPolicy((1.0,), max_tries=2, growth=1.0, jitter=0.0)
    told = transcript(FakeTaskServer(), job.id)
    runs = retries(ScriptedBackend(), settings, job.id, transcript=told, retry=backoff)
    assert runs.state == "starting"
    seen: list[str] = []

    async def watch() -> None:
        while True:
            if not seen or seen[-1] != runs.state:
                seen.append(runs.state)
            await anyio.sleep(0.01)  # a sampler, as the health port's tick is

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            ending = await runs.run(run_spec(job, tmp_path, settings))
            tg.cancel_scope.cancel()
    # The resumed agent gets the "continue" prompt, which the scripted one answers.
    assert ending.final is not None and not ending.error
    assert (runs.retry, runs.resumes) == (1, 1)
    assert "in a tool" in seen and "retrying" in seen
    assert seen.index("in a tool") < seen.index("retrying")
    assert seen[0] == "starting" and "running" in seen[seen.index("retrying") :]


@pytest.mark.root
async def test_an_agent_cli_the_agent_user_could_rewrite_is_not_run(
    passable_tmp: Path, agent_user: AgentUser
) -> None:
    """With an agent user, a CLI in that user's folder (one task could rewrite it for the
    next, under another uid of a pool) fails the attempt unrun, the error saying why."""
    folder = passable_tmp / "agent-prefix"
    folder.mkdir(0o755)
    os.chown(folder, agent_user.uid, agent_user.gid)
    cli = plant_cli(folder / "claude", "2.1.332 (Claude Code)", agent_user)
    settings = settings_in(passable_tmp)
    job = task("Fix it.")
    work_dir = passable_tmp / "work"
    work_dir.mkdir(0o777)
    runs = retries(
        ClaudeBackend(str(cli)), settings, job.id, transcript=transcript(FakeTaskServer(), job.id)
    )
    spec = replace(run_spec(job, work_dir, settings), user=agent_user)
    with anyio.fail_after(20):
        ending = await runs.run(spec)
    assert euids_of(folder) == []
    why = f"{folder} is owned by uid {agent_user.uid} ({agent_user.name}), not root"
    assert ending.error == f"could not start claude: {why}" and ending.final is None
