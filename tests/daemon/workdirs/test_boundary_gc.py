"""A GC round over task directories an agent user owns: no link it swaps in redirects a
removal, and no depth it builds breaks the round.

Needs root (as CI has) to create the agent user: without it these tests fail saying so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from backends.process.identity import AgentUser
from daemon.boundary.beneath import remove_under
from daemon.protocol.gc_check import ParentState
from daemon.workdirs import gc_meta
from daemon.workdirs.gc import Collector
from daemon.workdirs.gc_meta import GcMeta
from daemon.workdirs.leases import DirLeases
from daemon.workdirs.repo_gc import RepoJanitor
from tests.daemon.workdirs.support import NOW, POLICY, FakeLookup, age_dir, ago, task_dir

pytestmark = pytest.mark.root

DEPTH = 1200
"""Past the interpreter's default recursion limit (1,000)."""


def _give(path: Path, user: AgentUser) -> None:
    """`path` and everything below it the agent user's, as its agent would have made them."""
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(path)], check=True)


def _as(user: AgentUser, script: str) -> None:
    """Run a shell line as the agent user (its agent acting in its own tree)."""
    env = user.environ({"PATH": "/usr/bin:/bin"})
    subprocess.run(["sh", "-c", script], env=env, check=True, cwd="/", **user.spawn_options())


def test_a_parent_swapped_for_a_link_as_the_gc_reaches_node_modules_redirects_nothing(
    agent_user: AgentUser, passable_tmp: Path, tmp_path: Path
) -> None:
    """The agent swaps `web/` for a link to a root-owned folder holding `node_modules` at the
    moment the GC finds `web/node_modules`: that folder stays, and the real one goes."""
    outside = tmp_path / "global"
    (outside / "node_modules" / "npm").mkdir(parents=True)
    (outside / "node_modules" / "npm" / "cli.js").write_text("root's\n")
    root = passable_tmp / "workspaces"
    env_root = task_dir(root, "t", GcMeta(gc_meta.ISSUE, "ws-1", issue_id="i"), ago(13))
    web = env_root / "workdir" / "web"
    (web / "node_modules" / "left-pad").mkdir(parents=True)
    (web / "node_modules" / "left-pad" / "index.js").write_text("x" * 100)
    _give(env_root, agent_user)
    swapped: list[str] = []

    def swap(name: str) -> None:
        # What an agent watching with inotify does as the GC opens the folder.
        _as(agent_user, f"mv {web} {web}.real && ln -s {outside} {web}")
        swapped.append(name)

    lookup = FakeLookup(issue_states={"i": ParentState(True, "todo", ago(100))})
    repos = RepoJanitor(POLICY.repo_ttl, now=lambda: NOW)
    gc = Collector(
        root, POLICY, lookup, DirLeases(), repos=repos, now=lambda: NOW, on_artifact=swap
    )
    stats = gc.run_round()
    assert swapped == ["node_modules"] and web.is_symlink()
    assert (outside / "node_modules" / "npm" / "cli.js").read_text() == "root's\n"
    assert not (env_root / "workdir" / "web.real" / "node_modules").exists()
    assert stats.artifact_removed == 1


def test_a_folder_chain_past_the_recursion_limit_does_not_break_the_round(
    agent_user: AgentUser, tmp_path: Path
) -> None:
    """An expired task directory holding a chain 1,200 folders deep is removed, and so is the
    expired one beside it: the round completes."""
    root = tmp_path / "workspaces"
    deep, beside = task_dir(root, "deep"), task_dir(root, "beside")
    fd = os.open(deep / "workdir", os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    for made in (deep, beside):
        _give(made, agent_user)
        age_dir(made, 500)
    repos = RepoJanitor(POLICY.repo_ttl, now=lambda: NOW)
    gc = Collector(root, POLICY, FakeLookup(), DirLeases(), repos=repos, now=lambda: NOW)
    try:
        stats = gc.run_round()
        assert not deep.exists() and not beside.exists()
        assert stats.orphaned == 2
    finally:
        # pytest's own clean-up of old temp dirs recurses, and would fail on a chain left here.
        remove_under(deep.parent, deep.name)
