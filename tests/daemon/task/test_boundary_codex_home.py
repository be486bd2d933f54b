"""An agent user's `~/.codex` cannot hand it the daemon's secrets, nor hang the next setup, nor
send root through a link to read rollouts the agent could not.

Needs root (as CI has) to create the agent user: without it these tests fail saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import tomllib
from pathlib import Path

import pytest

from backends.base import RunSpec
from backends.codex.rollouts import rollout_present, rollout_totals
from backends.process.identity import AgentUser
from daemon.boundary.agent_user import SHARED_DIR_MODE
from daemon.task.session_pin import resumable_check
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


THREAD = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
TOKENS = {"input_tokens": 9001, "cached_input_tokens": 0, "cache_write_input_tokens": 0}


def _rollout(folder: Path, thread: str = THREAD) -> None:
    """A rollout of `thread` in `folder`, its last token count 9001 input tokens."""
    usage = {**TOKENS, "output_tokens": 7, "reasoning_output_tokens": 0, "total_tokens": 9008}
    line = {
        "type": "event_msg",
        "payload": {"type": "token_count", "info": {"total_token_usage": usage}},
    }
    (folder / f"rollout-2026-11-28T10-00-00-{thread}.jsonl").write_text(json.dumps(line) + "\n")


def _root_only(base: Path) -> Path:
    """A root-only folder holding a rollout of THREAD: what the agent must not have read."""
    secret = base / "root-only"
    secret.mkdir(mode=0o700)
    _rollout(secret)
    for rollout in secret.iterdir():
        rollout.chmod(0o644)  # readable by its mode bits, not by the path to it
    return secret


def _codex_task(user: AgentUser, base: Path) -> tuple[Path, Path]:
    """A task's Codex home made from the user's (with its sessions): (task home, the user's
    sessions the daemon linked it to)."""
    codex = Path(user.home) / ".codex"
    _as(user, f"mkdir -p {codex}/sessions")
    home = prepare_codex_home(_task_dir(user, base), codex, [], user.owner)
    return home, codex / "sessions"


def test_a_sessions_link_the_agent_swapped_is_not_followed(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """The agent replaces its task's `codex-home/sessions` with a link to a root-only folder
    holding a rollout: root neither reads the rollout's usage nor sees that it exists."""
    home, _ = _codex_task(agent_user, passable_tmp)
    secret = _root_only(passable_tmp)
    _as(agent_user, f"rm {home}/sessions && ln -s {secret} {home}/sessions")
    assert rollout_totals(home, THREAD, agent_user.owner) == {}
    spec = RunSpec("p", passable_tmp, {"CODEX_HOME": str(home)}, user=agent_user)
    resumable = resumable_check("codex", spec)
    assert resumable is not None and not resumable(THREAD)


def test_the_users_sessions_are_read_from_the_daemons_side_only(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """The task's link is resolved to the user's sessions by the daemon, not by the link: a
    rollout there is read; the user's `sessions` swapped for a link to a root-only folder is
    not followed either."""
    home, users = _codex_task(agent_user, passable_tmp)
    _as(agent_user, f"mkdir -p {users}/2026/11/28")
    _rollout(users / "2026" / "11" / "28", "mine")
    owner = agent_user.owner
    assert rollout_totals(home, "mine", owner, users) == {**TOKENS, "output_tokens": 7}
    assert rollout_present(home, "mine", owner, users)
    secret = _root_only(passable_tmp)
    _as(agent_user, f"mv {users} {users}.old && ln -s {secret} {users}")
    assert rollout_totals(home, THREAD, owner, users) == {}
    assert not rollout_present(home, THREAD, owner, users)
