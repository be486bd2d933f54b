"""Tests for the `command` backend, running real executables."""

from __future__ import annotations

import stat
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from backends.base import Message, MessageType, RunResult, RunSpec, RunStatus
from backends.command import CommandBackend
from backends.process import TRACKING_ENV
from tests.backends.support import RecordingObserver


def executable(path: Path, body: str) -> Path:
    """Write an executable script (its first line names the interpreter)."""
    path.write_text(textwrap.dedent(body).lstrip())
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def python_script(path: Path, code: str) -> Path:
    return executable(path, f"#!{sys.executable}\n" + textwrap.dedent(code))


async def run(
    backend: CommandBackend, tmp_path: Path, prompt: str = "do it", **fields: Any
) -> tuple[list[Message], RunResult]:
    """Run the backend once to the end; returns every message and the result."""
    spec = RunSpec(prompt=prompt, workdir=tmp_path, env={"PATH": "/usr/bin:/bin"}, **fields)
    async with backend.start(spec) as agent:
        messages = [m async for m in agent.messages()]
        return messages, await agent.result()


@pytest.mark.anyio
async def test_detect_resolves_an_executable_without_running_it(tmp_path: Path) -> None:
    """An executable path is detected (as its resolved path) without being started."""
    marker = tmp_path / "ran"
    tool = executable(tmp_path / "agent", f"#!/bin/sh\ntouch {marker}\n")
    assert await CommandBackend(str(tool)).detect() == str(tool.resolve())
    assert not marker.exists()


@pytest.mark.anyio
async def test_detect_finds_a_bare_name_on_the_search_path(tmp_path: Path) -> None:
    """A bare command name is looked up on the given search path."""
    tool = executable(tmp_path / "my-agent", "#!/bin/sh\n")
    backend = CommandBackend("my-agent", search_path=str(tmp_path))
    assert await backend.detect() == str(tool.resolve())


@pytest.mark.anyio
async def test_detect_rejects_missing_and_non_executable_files(tmp_path: Path) -> None:
    """A missing file or one without the execute bit is not an agent."""
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    assert await CommandBackend(str(plain)).detect() is None
    assert await CommandBackend(str(tmp_path / "absent")).detect() is None
    assert await CommandBackend(str(tmp_path)).detect() is None


@pytest.mark.anyio
async def test_a_plain_script_yields_text_and_completes_with_it(tmp_path: Path) -> None:
    """A shell script that just prints is text messages, completed with the joined text."""
    script = executable(tmp_path / "agent.sh", "#!/bin/sh\necho 'step one'\necho 'step two'\n")
    messages, result = await run(CommandBackend(str(script)), tmp_path)
    assert messages == [
        Message(MessageType.TEXT, content="step one"),
        Message(MessageType.TEXT, content="step two"),
    ]
    assert (result.status, result.output, result.exit_code) == (
        RunStatus.COMPLETED,
        "step one\nstep two",
        0,
    )


@pytest.mark.anyio
async def test_json_lines_become_typed_messages_and_the_result_output_wins(
    tmp_path: Path,
) -> None:
    """Protocol lines become typed messages; the result line's output is the run's output."""
    script = python_script(
        tmp_path / "agent",
        """
        import json
        for event in (
            {"type": "status", "session_id": "s-9"},
            {"type": "tool_use", "tool": "Bash", "call_id": "c1", "input": {"command": "ls"}},
            {"type": "tool_result", "call_id": "c1", "output": "a b"},
            {"type": "text", "content": "thinking out loud"},
            {"type": "result", "output": "final answer", "usage": {"input_tokens": 5}},
        ):
            print(json.dumps(event), flush=True)
        """,
    )
    messages, result = await run(CommandBackend(str(script), name="mine"), tmp_path)
    assert [m.type for m in messages] == [
        MessageType.STATUS,
        MessageType.TOOL_USE,
        MessageType.TOOL_RESULT,
        MessageType.TEXT,
        MessageType.RESULT,
    ]
    assert messages[1].input == {"command": "ls"}
    assert result.status is RunStatus.COMPLETED
    assert (result.output, result.session_id) == ("final answer", "s-9")
    assert result.usage[0].provider == "mine" and result.usage[0].input_tokens == 5


@pytest.mark.anyio
async def test_a_nonzero_exit_fails_with_the_stderr_tail(tmp_path: Path) -> None:
    """Exit 2 is a failure whose error names the code and carries stderr."""
    script = executable(
        tmp_path / "agent.sh", "#!/bin/sh\necho working\necho 'boom: disk full' >&2\nexit 2\n"
    )
    _, result = await run(CommandBackend(str(script)), tmp_path)
    assert result.status is RunStatus.FAILED
    assert result.error == "exit code 2: boom: disk full"
    assert result.exit_code == 2


@pytest.mark.anyio
async def test_prompt_args_workdir_and_environment_reach_the_command(tmp_path: Path) -> None:
    """The prompt comes on stdin; args then extra args follow; cwd and env are the task's."""
    script = python_script(
        tmp_path / "agent",
        f"""
        import os, sys
        print(sys.stdin.read().upper())
        print(sys.argv[1:])
        print(os.getcwd())
        print(os.environ["{TRACKING_ENV}"], os.environ["PATH"])
        """,
    )
    workdir = tmp_path / "work"
    workdir.mkdir()
    backend = CommandBackend(str(script), args=["--fixed"])
    observer = RecordingObserver()
    messages, result = await run(
        backend, workdir, "fix it", task_id="t-1", extra_args=("--extra",), observer=observer
    )
    assert [m.content for m in messages] == [
        "FIX IT",
        "['--fixed', '--extra']",
        str(workdir),
        "t-1 /usr/bin:/bin",
    ]
    assert result.status is RunStatus.COMPLETED
    assert observer.signals == []


@pytest.mark.anyio
async def test_a_missing_executable_fails_to_start_with_its_name(tmp_path: Path) -> None:
    """Starting a command that does not exist raises an OSError naming it."""
    with pytest.raises(FileNotFoundError, match="no-such-agent"):
        await run(CommandBackend(str(tmp_path / "no-such-agent")), tmp_path)
