"""An agent user's `~/.codex` cannot hand it the daemon's secrets, nor hang the next setup.

Needs root (as CI has) to create the agent user: without it these tests fail saying so.
"""

from __future__ import annotations

import os
import subprocess
import threading
import tomllib
from pathlib import Path

import pytest

from backends.process.identity import AgentUser
from daemon.agent_user import SHARED_DIR_MODE
from daemon.task.setup.codex_config import SHELL_POLICY
from daemon.task.setup.codex_home import prepare_codex_home

pytestmark = pytest.mark.root

SECRET = "daemon-token-0123456789"
SETUP_WITHIN = 10.0
"""Seconds the setup gets (it takes milliseconds): a safety net, not the behaviour."""


def _as(user: AgentUser, script: str) -> None:
    """Run a shell line as the agent user (its agent acting in its own home)."""
    env = user.environ({"PATH": "/usr/bin:/bin"})
    subprocess.run(["sh", "-c", script], env=env, check=True, cwd="/", **user.spawn_options())


def _task_dir(user: AgentUser, base: Path) -> Path:
    """`<root>/<workspace>/<task>` as the daemon lays it out: the task's folder the agent's."""
    workspace = base / "workspaces" / "ws"
    workspace.mkdir(parents=True)
    for passable in (workspace.parent, workspace):
        passable.chmod(SHARED_DIR_MODE)
    env_root = workspace / "task"
    env_root.mkdir(mode=0o700)
    os.chown(env_root, user.uid, user.gid)
    return env_root


def test_links_to_root_only_files_are_not_copied_into_the_agents_home(
    agent_user: AgentUser, passable_tmp: Path, tmp_path: Path
) -> None:
    """`config.toml` linked to the daemon's token, `instructions.md` a hard link to it and
    `config.json` linked to root's environ: none of them reaches the task's Codex home."""
    secret = Path(agent_user.home).parent / f".{agent_user.name}-server.token"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    codex = Path(agent_user.home) / ".codex"
    try:
        _as(agent_user, f"mkdir {codex} && ln -s {secret} {codex}/config.toml")
        _as(agent_user, f"ln -s /proc/self/environ {codex}/config.json")
        # The hard link as a machine with fs.protected_hardlinks=0 lets the agent make it.
        os.link(secret, codex / "instructions.md")
        env_root = _task_dir(agent_user, passable_tmp)
        home = prepare_codex_home(env_root, codex, [], agent_user.owner)
        copied = {p.name: p.read_bytes() for p in home.iterdir() if p.is_file()}
        assert not any(SECRET.encode() in data for data in copied.values()), copied.keys()
        assert not {"config.json", "instructions.md"} & set(copied)
        assert tomllib.loads(copied["config.toml"].decode()).keys() == {
            "features",
            "memories",
            SHELL_POLICY,
        }
        environ = Path("/proc/self/environ").read_bytes()
        assert not any(environ[:64] in data for data in copied.values() if data)
    finally:
        secret.unlink()


def test_a_fifo_for_config_does_not_hang_the_setup(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """`config.toml` made a FIFO: the setup finishes without it (no writer ever comes)."""
    codex = Path(agent_user.home) / ".codex"
    _as(agent_user, f"mkdir {codex} && mkfifo {codex}/config.toml")
    env_root = _task_dir(agent_user, passable_tmp)
    done: list[Path] = []
    setup = threading.Thread(
        target=lambda: done.append(prepare_codex_home(env_root, codex, [], agent_user.owner)),
        daemon=True,
    )
    setup.start()
    setup.join(SETUP_WITHIN)
    try:
        assert not setup.is_alive(), "the setup hangs on the FIFO"
        assert done and "model" not in tomllib.loads((done[0] / "config.toml").read_text())
    finally:
        if setup.is_alive():  # a writer that opens and closes lets the blocked read end
            os.close(os.open(codex / "config.toml", os.O_WRONLY | os.O_NONBLOCK))
            setup.join(SETUP_WITHIN)
