"""No silent root agents: a root daemon of a remote server without an agent user refuses to
start unless told it may; on the embedded server it warns once (real `agent-daemon run`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.daemon_child import run_cli
from tests.helpers import daemon_env, daemon_process, eventually

pytestmark = [pytest.mark.root, pytest.mark.anyio]

UNREACHABLE = "http://127.0.0.1:9"
"""A remote server nobody answers at: the refusal comes before any request."""


def test_the_tests_run_as_root() -> None:
    """These tests are about a root daemon: without root they would prove nothing."""
    assert os.geteuid() == 0


async def test_a_remote_server_without_an_agent_user_exits_2_naming_both_variables(
    tmp_path: Path,
) -> None:
    """Root, a remote server, no MULTICA_AGENT_USER: exit 2, one line naming the variable and
    the opt-out, before the state directory is locked or the health port opened."""
    env = daemon_env(tmp_path, UNREACHABLE, MULTICA_AGENT_ALLOW_ROOT="0")
    code, _, err = await run_cli("run", env=env)
    lines = err.strip().splitlines()
    assert (code, len(lines)) == (2, 1), err
    assert lines[0].startswith("agent-daemon: refusing to run agents as root")
    assert "MULTICA_AGENT_USER" in lines[0] and "MULTICA_AGENT_ALLOW_ROOT=1" in lines[0]
    assert not (tmp_path / "state" / "daemon.lock").exists()


async def test_the_opt_out_starts_with_one_warning(tmp_path: Path) -> None:
    """MULTICA_AGENT_ALLOW_ROOT=1: the daemon starts (it waits for its server) and says once
    that agents run as root."""
    log = tmp_path / "daemon.log"
    env = daemon_env(tmp_path, UNREACHABLE, MULTICA_AGENT_ALLOW_ROOT="1")
    async with daemon_process(env, log=log) as proc:
        await eventually(lambda: "server not reachable" in log.read_text(), within=30, every=0.1)
        proc.terminate()
        await proc.wait()
    text = log.read_text()
    assert text.count("agents run as root (MULTICA_AGENT_ALLOW_ROOT=1)") == 1, text


async def test_the_embedded_server_starts_with_one_warning(tmp_path: Path) -> None:
    """No server URL (the embedded one, local only): the daemon runs, with one warning line
    naming MULTICA_AGENT_USER."""
    log = tmp_path / "daemon.log"
    env = daemon_env(
        tmp_path,
        "",
        MULTICA_AGENT_ALLOW_ROOT="0",
        MULTICA_EMBEDDED_LISTEN="127.0.0.1:0",
        MULTICA_DAEMON_TOKEN="embedded-token",
    )
    async with daemon_process(env, log=log) as proc:
        await eventually(lambda: "embedded server listening" in log.read_text(), within=30)
        proc.terminate()
        await proc.wait()
    warnings = [line for line in log.read_text().splitlines() if "agents run as root" in line]
    assert len(warnings) == 1, log.read_text()
    assert "MULTICA_AGENT_USER" in warnings[0]
