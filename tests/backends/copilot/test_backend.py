"""The Copilot backend's command line: Multica's flags, the model, the session, the filter;
the prompt on stdin, never in a process's command line."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backends.base import AgentRun, MessageType, RunSpec
from backends.copilot import CopilotBackend
from backends.copilot.backend import prompt_text
from daemon.testing import task_processes

HEADLESS = ["--output-format", "json", "--allow-all", "--no-ask-user"]


def spec(tmp_path: Path, **fields: object) -> RunSpec:
    return RunSpec(prompt="Fix it.", workdir=tmp_path, env={}, **fields)  # type: ignore[arg-type]


def test_a_headless_json_run_has_no_prompt_in_its_arguments(tmp_path: Path) -> None:
    """`copilot --output-format json --allow-all --no-ask-user`, nothing more: no `-p`."""
    assert CopilotBackend("copilot").argv(spec(tmp_path)) == ["copilot", *HEADLESS]


def test_model_and_session_to_resume_are_flags(tmp_path: Path) -> None:
    """The task's model (else the configured one) and the session go in as flags."""
    backend = CopilotBackend("/opt/copilot", model="gpt-5")
    assert backend.argv(spec(tmp_path), resume="s-1")[-4:] == [
        "--model",
        "gpt-5",
        "--resume",
        "s-1",
    ]
    assert "gpt-4.1" in backend.argv(spec(tmp_path, model="gpt-4.1"))


def test_instructions_go_first_in_the_prompt(tmp_path: Path) -> None:
    """The CLI has no system-prompt flag: instructions lead the prompt it reads."""
    assert prompt_text(spec(tmp_path, instructions="Be brief.")) == "Be brief.\n\nFix it."


def test_configured_arguments_cannot_take_over_the_daemons_flags(tmp_path: Path) -> None:
    """A configured output format, prompt, session or ACP switch is dropped with its value;
    anything else is passed on after the daemon's flags."""
    args = ["--output-format", "text", "--resume=old", "--acp", "-p", "x", "--max-turns", "5"]
    argv = CopilotBackend("copilot", args).argv(spec(tmp_path))
    assert argv == ["copilot", *HEADLESS, "--max-turns", "5"]


# A stand-in CLI shaped like the npm package (a loader whose native binary is its child, given
# the loader's argv and stdin): the child answers with what it read on stdin, once it runs, and
# both wait to be killed with the run.
_LIVE_CLI = """#!{python}
import subprocess, sys
native = '''
import json, sys, time
data = {{"messageId": "m", "content": "read: " + sys.stdin.read()}}
print(json.dumps({{"type": "assistant.message", "data": data}}), flush=True)
time.sleep(60)
'''
sys.exit(subprocess.call([sys.executable, "-c", native, *sys.argv[1:]]))
"""


@pytest.mark.anyio
async def test_no_process_of_a_live_run_shows_the_prompt_in_its_command_line(
    tmp_path: Path,
) -> None:
    """/proc/<pid>/cmdline is world-readable: while the run lives, no process of it carries a
    word of the prompt or the instructions there; the CLI read them on stdin."""
    cli = tmp_path / "copilot"
    cli.write_text(_LIVE_CLI.format(python=sys.executable))
    cli.chmod(0o755)
    secret = "Deploy the 7f3a-canary build to the staging ring."
    run_spec = RunSpec(
        prompt=secret, workdir=tmp_path, env={}, task_id="t-cmdline", instructions="Whisper 9c2e."
    )
    async with CopilotBackend(str(cli)).start(run_spec) as run:
        heard = [m async for m in _until_text(run)]
        lines = {p.pid: _cmdline(p.pid) for p in task_processes("t-cmdline")}
    assert len(lines) == 2, lines  # the loader and its child, both live when read
    shown = b"\n".join(lines.values())
    assert b"7f3a-canary" not in shown and b"9c2e" not in shown, lines
    assert heard == ["read: Whisper 9c2e.\n\n" + secret]


async def _until_text(run: AgentRun) -> AsyncIterator[str]:
    """The text of the run's messages up to its first answer."""
    async for message in run.messages():
        if message.type is MessageType.TEXT:
            yield message.content
            return


def _cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read()
