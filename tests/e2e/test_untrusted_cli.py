"""A real root `agent-daemon run` with one agent user, and with a pool, never runs an agent CLI
the agents can rewrite: staged as a prompt-injected agent would, with OpenCode (an ACP agent)
installed under the agent user's own npm prefix and rewritten by a task. Needs root (as CI has)
to create the users.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from backends.process.identity import AgentUser
from daemon.cli.tasks_api import TasksApi
from tests.daemon_child import daemon_child
from tests.fakes.agent_cli import euids_of, plant_cli, recording_cli
from tests.fakes.system_user import AGENT_USER_CAPABILITIES, with_only
from tests.helpers import FINAL, TOKEN, daemon_env, eventually, server_client

pytestmark = [pytest.mark.anyio, pytest.mark.root]

_EMBEDDED = re.compile(r"embedded server listening on (http://\S+)")

# The task's agent: writes its own OpenCode over the one in its prefix, as an injected prompt
# would have it do (`$1` the new script, `$2` the installed CLI).
REWRITER = """#!/bin/sh
cat "$1" > "$2" && echo "rewrote $2 as $(id -u)"
"""


@pytest.mark.parametrize("pool", [False, True], ids=["one agent user", "a pool"])
async def test_an_acp_cli_the_agent_can_rewrite_is_never_run_by_root_nor_offered(
    passable_tmp: Path, two_users: tuple[AgentUser, AgentUser], pool: bool
) -> None:
    """OpenCode under a prefix its agent user owns: the root daemon does not run it for
    `--version` (not as root, not at all), says so in one line and does not offer it; a task
    rewrites it and the CLI watch runs nothing either, saying so once for the new executable."""
    a, b = two_users
    owner = a  # the user the probes would run as, and the first a task runs as
    prefix = passable_tmp / "npm-prefix"
    prefix.mkdir(0o755)
    os.chown(prefix, owner.uid, owner.gid)
    opencode = plant_cli(prefix / "opencode", "1.18.33", owner)
    payload = passable_tmp / "payload"
    payload.write_text(recording_cli("1.99.0"))
    payload.chmod(0o644)
    rewriter = passable_tmp / "rewriter.sh"
    rewriter.write_text(REWRITER)
    rewriter.chmod(0o755)
    env = daemon_env(
        passable_tmp,
        "",
        MULTICA_AGENT_USER=f"{a.name},{b.name}" if pool else a.name,
        MULTICA_EMBEDDED_LISTEN="127.0.0.1:0",
        MULTICA_SCRIPTED_BACKEND="0",
        MULTICA_OPENCODE_PATH=str(opencode),
        MULTICA_COMMAND_PATH=str(rewriter),
        MULTICA_COMMAND_ARGS=f"{payload} {opencode}",
        MULTICA_DAEMON_CLI_CHECK_INTERVAL="100ms",
    )
    python = (*with_only(AGENT_USER_CAPABILITIES), sys.executable)
    async with daemon_child(env, python=python) as child:
        await eventually(lambda: _EMBEDDED.search(child.log) is not None, within=15)
        url = _EMBEDDED.search(child.log).group(1)  # type: ignore[union-attr]
        async with server_client(url, TOKEN) as http:
            api = TasksApi(http)
            task = await _rewritten_by(api, owner)
        async with httpx.AsyncClient(timeout=5) as http:
            agents = (await http.get(f"{child.health_url}/health")).json()["agents"]

        # One line at start-up and one per rewritten executable; none for the checks between
        # (ten a second), which find the same executable.
        def refused() -> list[str]:
            return [line for line in child.lines if "backend opencode: refused" in line]

        await eventually(lambda: len(refused()) >= 2)
        said = len(refused())
        await anyio.sleep(1.0)
        assert len(refused()) == said, refused()
    assert 0 not in euids_of(prefix), "root ran a CLI the agent user wrote"
    assert euids_of(prefix) == []
    assert task["status"] == "completed", task["error"]
    assert "opencode" not in agents and "command" in agents
    why = f"{prefix} is owned by uid {owner.uid} ({owner.name}), not root"
    assert all(line.endswith(f"refused, not offered: {why}") for line in refused()), refused()


async def _rewritten_by(api: TasksApi, owner: AgentUser) -> dict[str, object]:
    """Run the rewriting task until it ran as `owner` (at most four tries); that task."""
    for _ in range(4):
        task_id = str((await api.create_task("Rewrite it.", backend="command"))["id"])

        async def ended(task_id: str = task_id) -> bool:
            return (await api.get_task(task_id))["status"] in FINAL

        await eventually(ended, within=30)
        task = await api.get_task(task_id)
        if f"as {owner.uid}" in str(task.get("output", "")):
            return task
    raise AssertionError(f"no task ran as {owner.name}")
