"""With MULTICA_AGENT_USER, a checkout is the agent user's own and the cache stays the daemon's.

Needs root (as CI has) to create the user: without it this test fails saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from backends.process.identity import AgentUser
from daemon.agent_user import SHARED_DIR_MODE
from daemon.private_files import ensure_dir
from daemon.protocol.models import RepoRef, WorkspaceRepos
from daemon.workdirs.catalog import ActiveTask
from daemon.workdirs.service import Workdirs
from tests.daemon.test_agent_user_daemon import root_daemon, wait_task
from tests.daemon.workdirs.support import CHECKOUT_AGENT, calls, make_origin

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
    workdirs = Workdirs(root, {"PATH": "/usr/bin:/bin"}, _never, user=agent_user)
    workdirs.catalog.set_workspace("ws", [RepoRef(url=url)])
    task = ActiveTask("ws", "0190f3c2-7a1b-7c3d-8e4f-a1b2c3d4e5f6", "bot", work)
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


# After the checkout, the agent (the agent user) commits in it and says who owns what.
COMMIT = """
app = answers[0]['path']
def sh(*argv):
    return subprocess.run(argv, cwd=app, capture_output=True, text=True)
open(app + '/README.md', 'a').write('by the agent\\n')
sh('git', 'add', 'README.md')
done = sh('git', '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-qm', 'agent work')
report.update(uid=os.getuid(), commit=done.returncode, said=done.stderr,
              owner=os.stat(app + '/.git/HEAD').st_uid)
"""


@pytest.mark.anyio
async def test_a_root_daemons_agent_user_checks_out_and_commits(
    passable_tmp: Path, agent_user: AgentUser, tmp_path: Path
) -> None:
    """`agent-daemon run` as root with MULTICA_AGENT_USER and the embedded server's repos: the
    agent, running as the user, checks out through the health port and commits there."""
    url = make_origin(tmp_path / "o")
    agent = passable_tmp / "checkout_agent.py"
    agent.write_text(CHECKOUT_AGENT)
    agent.chmod(0o644)
    settings = {
        "MULTICA_COMMAND_PATH": "/usr/bin/python3",
        "MULTICA_COMMAND_ARGS": str(agent),
        "MULTICA_EMBEDDED_REPOS": url,
    }
    async with root_daemon(passable_tmp, agent_user, **settings) as (_, api):
        custom = {"name": "Bot", "custom_env": calls({"url": url}, then=COMMIT)}
        task = await api.create_task("Check out.", backend="command", agent=custom)
        done = await wait_task(api, str(task["id"]), within=60)
    assert done["status"] == "completed", (done["error"], done["output"])
    report = json.loads(done["output"])
    assert report["answers"][0]["status"] == 200, report["answers"]
    assert (report["uid"], report["owner"]) == (agent_user.uid, agent_user.uid)
    assert report["commit"] == 0, report["said"]
