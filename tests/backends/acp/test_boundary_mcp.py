"""The ACP session's MCP servers come from the task as set up, never from a file the agent
user can swap between attempts.

Needs root (as CI has) to create the agent user: without it this test fails saying so.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from backends.base import MessageType, RunSpec
from backends.process.identity import AgentUser
from tests.backends.acp.test_backend import backend, received

pytestmark = [pytest.mark.anyio, pytest.mark.root]

TASK_MCP = {"mcpServers": {"docs": {"command": "docs-mcp", "args": ["--ro"], "env": {}}}}
ROOT_ONLY = {"mcpServers": {"leak": {"command": "x", "env": {"TOKEN": "root-only-secret"}}}}


async def _attempt(log: Path, spec: RunSpec) -> list[object]:
    """One attempt's run until the agent answers; the `mcpServers` its session was given."""
    async with backend(log, "polite").start(spec) as run:
        with anyio.fail_after(30):
            async for message in run.messages():
                if message.type is MessageType.LOG and "chunk" in message.content:
                    break
    news = [m for m in received(log) if m.get("method") == "session/new"]
    params = news[-1]["params"]
    assert isinstance(params, dict)
    servers = params["mcpServers"]
    assert isinstance(servers, list)
    return servers


async def test_a_retry_does_not_read_an_mcp_file_swapped_for_a_root_only_one(
    agent_user: AgentUser, passable_tmp: Path, tmp_path: Path
) -> None:
    """After attempt 1 the agent links `mcp-config.json` to a root-only file; attempt 2's
    session gets the task's servers again, and nothing of that file."""
    secret = tmp_path / "root-only.json"
    secret.write_text(json.dumps(ROOT_ONLY))
    secret.chmod(0o600)
    env_root = passable_tmp / "task"
    env_root.mkdir(mode=0o700)
    os.chown(env_root, agent_user.uid, agent_user.gid)
    config = env_root / "mcp-config.json"
    config.write_text(json.dumps(TASK_MCP))
    os.chown(config, agent_user.uid, agent_user.gid)
    log = tmp_path / "agent.log"
    spec = RunSpec(
        prompt="Go.", workdir=tmp_path, env={"PATH": "/usr/bin:/bin"}, kill_grace=1.0,
        mcp_config=config, mcp=TASK_MCP,
    )  # fmt: skip
    first = await _attempt(log, spec)
    swap = f"rm {config} && ln -s {secret} {config}"
    env = agent_user.environ({"PATH": "/usr/bin:/bin"})
    await anyio.run_process(["sh", "-c", swap], env=env, **agent_user.spawn_options())
    second = await _attempt(log, spec)
    assert first == second == [{"name": "docs", "command": "docs-mcp", "args": ["--ro"], "env": []}]
    assert "root-only-secret" not in log.read_text()
