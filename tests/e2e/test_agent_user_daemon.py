"""A real root `agent-daemon run` with MULTICA_AGENT_USER: its agents run as that user, reach
their own work and nothing of the daemon's, and still die with their task — the command
backend (a shell agent) and the real Claude Code CLI completing a Bash tool call.

Needs root (as CI has) to create the user: without it these tests fail saying so.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from backends.process import identify, is_alive
from backends.process.identity import AgentUser
from daemon.cli.tasks_api import TasksApi
from tests.daemon_child import DaemonChild, daemon_child
from tests.fakes.anthropic_api import Text, ToolUse, claude_env, fake_anthropic
from tests.fakes.real_cli import require_cli
from tests.fakes.system_user import AGENT_USER_CAPABILITIES, with_only
from tests.helpers import FINAL, NO_PID_NAMESPACE, TOKEN, daemon_env, eventually, server_client

pytestmark = [pytest.mark.anyio, pytest.mark.root]

_EMBEDDED = re.compile(r"embedded server listening on (http://\S+)")

# A shell agent (no interpreter of the test's: the agent user may not reach it) that reports
# who it is and what it may touch, one `key=value` line each; `straggle` leaves a detached
# sleeper behind first, as an agent's tool can.
AGENT = r"""#!/bin/sh
state="$1"
try() { if "$@" >/dev/null 2>&1; then echo allowed; else echo refused; fi; }
if [ "$2" = straggle ]; then
    env -i setsid sleep 333 </dev/null >/dev/null 2>&1 &
    echo "straggler=$!"
    sleep 3  # the test finds the sleeper while the task runs; then the agent leaves it
    exit 0
fi
echo "uid=$(id -u)"
echo "gid=$(id -g)"
echo "groups=$(id -G)"
echo "home=$HOME user=$USER logname=$LOGNAME"
echo "nnp=$(sed -n 's/^NoNewPrivs:[[:space:]]*//p' /proc/self/status)"
echo "capeff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)"
echo "daemon=$PPID"
echo "daemon_environ=$(try cat /proc/$PPID/environ)"
echo "list_state=$(try ls "$state")"
echo "read_db=$(try cat "$state/server.db")"
echo "list_root=$(try ls "$MULTICA_TASK_WORKSPACES_ROOT")"
echo "write_work=$(try touch "$MULTICA_WORKDIR/made-by-agent")"
echo "write_tmp=$(try touch "$TMPDIR/made-by-agent")"
echo "read_brief=$(try cat "$MULTICA_WORKDIR/AGENTS.md")"
"""


@asynccontextmanager
async def root_daemon(
    home: Path, user: AgentUser, **env: str
) -> AsyncIterator[tuple[DaemonChild, TasksApi]]:
    """`agent-daemon run` as root with its embedded server (state in `home/state`) and
    MULTICA_AGENT_USER (`env` may name a pool there instead); yields the child and the task
    API of its server."""
    assert os.geteuid() == 0
    defaults = {"MULTICA_AGENT_USER": user.name, "MULTICA_EMBEDDED_LISTEN": "127.0.0.1:0"}
    settings = daemon_env(home, "", **defaults, MULTICA_SCRIPTED_BACKEND="0") | env
    # Run with only the capabilities the deploy files grant it: they are shown to suffice.
    python = (*with_only(AGENT_USER_CAPABILITIES), sys.executable)
    async with daemon_child(settings, python=python) as child:
        # The health port listens first; the embedded server's line follows.
        await eventually(lambda: _EMBEDDED.search(child.log) is not None, within=15)
        url = _EMBEDDED.search(child.log).group(1)  # type: ignore[union-attr]
        try:
            async with server_client(url, TOKEN) as http:
                yield child, TasksApi(http)
        except Exception as exc:
            # A refused connection to the embedded server means the daemon is gone or not
            # serving: its own log says which, so the failure carries it.
            exc.add_note(f"daemon exit code {child.process.returncode}; its log:\n{child.log}")
            raise


async def run_task(api: TasksApi, backend: str, within: float = 30) -> dict[str, Any]:
    return await wait_task(
        api, str((await api.create_task("Look around.", backend=backend))["id"]), within
    )


async def wait_task(api: TasksApi, task_id: str, within: float = 30) -> dict[str, Any]:
    async def ended() -> bool:
        return (await api.get_task(task_id))["status"] in FINAL

    await eventually(ended, within=within)
    return await api.get_task(task_id)


def shell_agent(home: Path, mode: str) -> dict[str, str]:
    """The `command` backend's settings for the shell agent, told the state dir and `mode`."""
    agent = home / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    args = f"{home / 'state'} {mode}"
    return {"MULTICA_COMMAND_PATH": str(agent), "MULTICA_COMMAND_ARGS": args}


def _report(output: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in output.splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_an_agent_runs_as_the_user_and_reaches_nothing_of_the_daemons(
    passable_tmp: Path, agent_user: AgentUser
) -> None:
    """The agent has the user's uid, gid, groups and HOME, no capabilities and no_new_privs;
    it writes its work and temp dirs and reads its brief, but cannot read the daemon's
    /proc environ (its token), list or read the state dir (server.db) or list the root."""
    report = shell_agent(passable_tmp, "report") | NO_PID_NAMESPACE
    async with root_daemon(passable_tmp, agent_user, **report) as (
        child,
        api,
    ):
        task = await run_task(api, "command")
        daemon_pid = child.process.pid
    assert task["status"] == "completed", (task["error"], task["output"])
    seen = _report(task["output"])
    assert (seen["uid"], seen["gid"]) == (str(agent_user.uid), str(agent_user.gid))
    assert sorted(int(g) for g in seen["groups"].split()) == sorted(agent_user.groups)
    assert seen["home"] == f"{agent_user.home} user={agent_user.name} logname={agent_user.name}"
    assert (seen["nnp"], int(seen["capeff"], 16)) == ("1", 0)
    assert seen["daemon"] == str(daemon_pid)
    assert {k: seen[k] for k in ("daemon_environ", "list_state", "read_db", "list_root")} == {
        "daemon_environ": "refused",
        "list_state": "refused",
        "read_db": "refused",
        "list_root": "refused",
    }
    assert {k: seen[k] for k in ("write_work", "write_tmp", "read_brief")} == dict.fromkeys(
        ("write_work", "write_tmp", "read_brief"), "allowed"
    )
    check_places(passable_tmp, Path(task["work_dir"]), agent_user)


def check_places(home: Path, work: Path, user: AgentUser) -> None:
    """What the agent was refused exists and is root's alone; what it wrote is its own; the
    way to its work dir is passable (0711) and its task dir is the user's (0700)."""
    state = home / "state"
    assert (state / "server.db").is_file() and _mode(state) == 0o700
    assert {p.stat().st_uid for p in state.rglob("*")} == {0}
    assert (work.stat().st_uid, (work / "made-by-agent").stat().st_uid) == (
        user.uid,
        user.uid,
    )
    modes = (_mode(home / "workspaces"), _mode(work.parent.parent), _mode(work.parent))
    assert modes == (0o711, 0o711, 0o700)


async def test_a_detached_straggler_of_the_agent_user_dies_with_its_task(
    passable_tmp: Path, agent_user: AgentUser
) -> None:
    """`env -i setsid sleep 333 &` (no tag, its own session, its parent gone) started by an
    agent running as the user is killed when its task ends, while the daemon runs on."""
    straggle = shell_agent(passable_tmp, "straggle") | NO_PID_NAMESPACE
    async with root_daemon(passable_tmp, agent_user, **straggle) as (
        child,
        api,
    ):
        task_id = str((await api.create_task("Leave one behind.", backend="command"))["id"])
        said: list[str] = []

        async def told() -> bool:
            said[:] = [m["content"] for m in await api.messages(task_id) if "=" in m["content"]]
            return bool(said)

        await eventually(told, within=15)
        straggler = identify(int(_report(said[0])["straggler"]))
        assert straggler is not None, "the sleeper ended before the test saw it"
        status, environ = proc_facts(straggler.pid)
        task = await wait_task(api, task_id)
        await eventually(lambda: not is_alive(straggler), within=10)
        assert child.process.returncode is None
    assert task["status"] == "completed", (task["error"], task["output"])
    assert f"Uid:\t{agent_user.uid}\t" in status and b"AGENT_DAEMON_TASK_ID" not in environ


def proc_facts(pid: int) -> tuple[str, bytes]:
    """A live process's /proc status and initial environment."""
    return Path(f"/proc/{pid}/status").read_text(), Path(f"/proc/{pid}/environ").read_bytes()


@pytest.mark.real_cli
async def test_claude_code_runs_a_bash_tool_as_the_agent_user(
    passable_tmp: Path, agent_user: AgentUser
) -> None:
    """The real CLI, in bypass mode as the agent user without IS_SANDBOX, runs a Bash tool
    call whose output shows the user's ids and HOME, and completes."""
    cli = require_cli("claude", "MULTICA_TEST_CLAUDE_PATH")
    command = 'echo "who=$(id -u):$(id -g) home=$HOME sandbox=${IS_SANDBOX-none}" | tee proof'
    async with fake_anthropic([ToolUse(command), Text("Checked.")]) as fake:
        agent_env = claude_env(fake.url, passable_tmp / "unused-home")
        async with root_daemon(passable_tmp, agent_user, MULTICA_CLAUDE_PATH=cli, **agent_env) as (
            _,
            api,
        ):
            task = await run_task(api, "claude", within=90)
            messages = await api.messages(task["id"])
    assert task["status"] == "completed", (task["error"], task["output"])
    assert task["output"] == "Checked."
    expected = f"who={agent_user.uid}:{agent_user.gid} home={agent_user.home} sandbox=none"
    results = [m["output"] for m in messages if m["type"] == "tool_result"]
    assert any(expected in r for r in results), results
    check_proof(Path(task["work_dir"]) / "proof", expected, agent_user)


def check_proof(proof: Path, expected: str, agent_user: AgentUser) -> None:
    """The tool's file says the same and is the user's; the CLI kept its state in its HOME."""
    assert (proof.read_text().strip(), proof.stat().st_uid) == (expected, agent_user.uid)
    assert Path(agent_user.home, ".claude").is_dir()
