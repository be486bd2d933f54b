"""With MULTICA_AGENT_USER, a checkout is the agent user's own and the cache stays the daemon's.

Needs root (as CI has) to create the user: without it this test fails saying so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from backends.process.identity import AgentUser
from daemon.boundary.agent_user import SHARED_DIR_MODE
from daemon.files.private import ensure_dir
from daemon.protocol.models import RepoRef
from daemon.protocol.runtime_models import WorkspaceRepos
from daemon.workdirs.catalog import ActiveTask
from daemon.workdirs.service import Workdirs
from tests.fakes.repo_checkout import make_origin
from tests.fakes.system_user import system_user

pytestmark = pytest.mark.root


async def _never(workspace_id: str) -> WorkspaceRepos:
    raise AssertionError("the list is known; the server is not asked")


def _as(user: AgentUser, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a command as the agent user, as its agent would."""
    env = user.environ({"PATH": "/usr/bin:/bin"})
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, **user.spawn_options()
    )


def test_the_checkout_belongs_to_the_agent_user(
    agent_user: AgentUser, passable_tmp: Path, tmp_path: Path
) -> None:
    """An isolated clone owned by the agent user, which can commit in it; the cache is root's,
    readable but not writable by that user; a second checkout keeps its work."""
    url = make_origin(tmp_path / "o")
    root = passable_tmp / "workspaces"
    ensure_dir(root).chmod(SHARED_DIR_MODE)
    work = root / "w1"
    work.mkdir(mode=0o700)
    os.chown(work, agent_user.uid, agent_user.gid)
    workdirs = Workdirs(root, {"PATH": "/usr/bin:/bin"}, _never, shared=True)
    workdirs.catalog.set_workspace("ws", [RepoRef(url=url)])
    task = ActiveTask("ws", "0190f3c2-7a1b-7c3d-8e4f-a1b2c3d4e5f6", "bot", work, agent_user)
    done = workdirs.check_out(task, url, "", work, 1.0)
    app = work / "app"
    assert done.path == app and (app / ".git").is_dir()
    assert {app.stat().st_uid, (app / ".git" / "HEAD").stat().st_uid} == {agent_user.uid}
    edit = _as(agent_user, "sh", "-c", "echo x >> README.md && git add README.md", cwd=app)
    commit = _as(
        agent_user,
        *("git", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "x"),
        cwd=app,
    )
    assert edit.returncode == commit.returncode == 0, edit.stderr + commit.stderr
    bare = workdirs.cache.bare_path("ws", url)
    assert bare.stat().st_uid == 0
    assert _as(agent_user, "test", "-r", str(bare / "HEAD"), cwd=app).returncode == 0
    assert _as(agent_user, "touch", str(bare / "planted"), cwd=app).returncode != 0
    (app / "wip.txt").write_text("half")
    again = workdirs.check_out(task, url, "", work, 1.0)
    assert again.kept and (app / "wip.txt").read_text() == "half"


def test_each_task_of_a_pool_checks_out_as_its_own_user(
    agent_user: AgentUser, passable_tmp: Path, tmp_path: Path
) -> None:
    """Two tasks at once, each running as another user of a pool, each with a work dir only
    its user may enter: each checkout is made by, and belongs to, its own task's user."""
    url = make_origin(tmp_path / "o")
    root = passable_tmp / "workspaces"
    ensure_dir(root).chmod(SHARED_DIR_MODE)
    workdirs = Workdirs(root, {"PATH": "/usr/bin:/bin"}, _never, shared=True)
    workdirs.catalog.set_workspace("ws", [RepoRef(url=url)])
    with system_user() as other:
        for n, user in enumerate((agent_user, other)):
            work = root / f"w{n}"
            work.mkdir(mode=0o700)
            os.chown(work, user.uid, user.gid)
            task = ActiveTask("ws", f"0190f3c2-7a1b-7c3d-8e4f-a1b2c3d4e5f{n}", "bot", work, user)
            done = workdirs.check_out(task, url, "", work, 1.0)
            owners = {done.path.stat().st_uid, (done.path / ".git" / "HEAD").stat().st_uid}
            assert owners == {user.uid}, (user.name, owners)
