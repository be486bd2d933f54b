"""A failed clone's cleanup cannot be sent outside the work dir by a link the agent swaps in.

Needs root (as CI has) to create the agent user: without it this test fails saying so.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from backends.process.identity import AgentUser
from daemon.boundary.agent_user import SHARED_DIR_MODE
from daemon.errors import GitError
from daemon.files.private import ensure_dir
from daemon.protocol.models import RepoRef
from daemon.protocol.runtime_models import WorkspaceRepos
from daemon.workdirs.catalog import ActiveTask
from daemon.workdirs.service import Workdirs
from tests.fakes.repo_checkout import make_origin

pytestmark = pytest.mark.root

# Played by the agent's own git: once the clone is made, the first later command swaps the
# work dir for a link to a root-owned folder and fails, so the daemon cleans up after it.
_SWAPPING_GIT = """#!/bin/sh
if [ "$(id -u)" != 0 ]; then
  for arg in "$@"; do
    if [ "$arg" = remote ]; then
      mv {work} {work}.real && ln -s {outside} {work}
      exit 1
    fi
  done
fi
exec {git} "$@"
"""


async def _never(workspace_id: str) -> WorkspaceRepos:
    raise AssertionError("the list is known; the server is not asked")


def test_a_failed_clones_cleanup_does_not_follow_a_swapped_work_dir(
    agent_user: AgentUser, passable_tmp: Path, tmp_path: Path
) -> None:
    """The agent's work dir, made a link to a root-owned folder holding `app/` while its git
    runs, leaves that folder whole when the daemon removes the half-made clone."""
    url = make_origin(tmp_path / "o")
    outside = tmp_path / "outside"
    (outside / "app").mkdir(parents=True)
    (outside / "app" / "precious").write_text("root's\n")
    root = passable_tmp / "workspaces"
    ensure_dir(root / "ws").chmod(SHARED_DIR_MODE)
    root.chmod(SHARED_DIR_MODE)
    task_dir, work = root / "ws" / "task", root / "ws" / "task" / "workdir"
    for mine in (task_dir, work):
        mine.mkdir(mode=0o700)
        os.chown(mine, agent_user.uid, agent_user.gid)
    bin_dir = passable_tmp / "bin"
    bin_dir.mkdir(mode=0o755)
    fake = bin_dir / "git"
    real = shutil.which("git")
    fake.write_text(_SWAPPING_GIT.format(work=work, outside=outside, git=real))
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    workdirs = Workdirs(root, env, _never, shared=True)
    workdirs.catalog.set_workspace("ws", [RepoRef(url=url)])
    task = ActiveTask("ws", "0190f3c2-7a1b-7c3d-8e4f-a1b2c3d4e5f6", "bot", work, agent_user)
    with pytest.raises(GitError):
        workdirs.check_out(task, url, "", work, 1.0)
    assert work.is_symlink(), "the agent's swap happened"
    assert (outside / "app" / "precious").read_text() == "root's\n"
