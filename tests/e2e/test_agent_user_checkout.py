"""A root `agent-daemon run` with MULTICA_AGENT_USER: its agent checks out a repository through
the health port and commits in it as that user.

Needs root (as CI has) to create the user: without it this test fails saying so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.process.identity import AgentUser
from daemon.workdirs.coauthor import TRAILER
from tests.e2e.test_agent_user_daemon import root_daemon, wait_task
from tests.fakes.repo_checkout import CHECKOUT_AGENT, calls, make_origin

pytestmark = [pytest.mark.anyio, pytest.mark.root]


# After the checkout, the agent (the agent user) commits in it and says who owns what.
COMMIT = """
app = answers[0]['path']
def sh(*argv):
    return subprocess.run(argv, cwd=app, capture_output=True, text=True)
open(app + '/README.md', 'a').write('by the agent\\n')
sh('git', 'add', 'README.md')
done = sh('git', '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-qm', 'agent work')
report.update(uid=os.getuid(), commit=done.returncode, said=done.stderr,
              owner=os.stat(app + '/.git/HEAD').st_uid,
              message=sh('git', 'log', '-1', '--format=%B').stdout,
              hook_owner=os.stat(app + '/.git/hooks/prepare-commit-msg').st_uid)
"""


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
    # The co-author hook, written through handles into the agent's clone, is the agent's.
    assert report["message"] == f"agent work\n\n{TRAILER}\n\n"
    assert report["hook_owner"] == agent_user.uid


# Both agents wait until the other runs too (a file each in a shared folder), so the two
# checkouts happen while both tasks hold a user of the pool.
BOTH_RUNNING = """
shared = os.environ['SHARED']
open(os.path.join(shared, str(os.getuid())), 'w').close()
for _ in range(600):
    if len(os.listdir(shared)) >= 2:
        break
    time.sleep(0.1)
"""
# Who the agent is and who owns what its checkout made.
OWNERS = """
app = answers[0].get('path', '')
report.update(uid=os.getuid(), owners=sorted({
    os.stat(os.path.join(app, name)).st_uid for name in ('.', 'README.md', '.git/HEAD')
}) if app else [])
"""


async def test_two_tasks_of_a_pool_each_check_out_as_their_own_user(
    passable_tmp: Path, two_users: tuple[AgentUser, AgentUser], tmp_path: Path
) -> None:
    """A pool of two and two tasks running at once: each agent's `repo checkout` succeeds and
    what it made belongs to that task's uid, not to the pool's first user."""
    a, b = two_users
    url = make_origin(tmp_path / "o")
    agent = passable_tmp / "checkout_agent.py"
    agent.write_text(CHECKOUT_AGENT)
    agent.chmod(0o644)
    shared = passable_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    settings = {
        "MULTICA_AGENT_USER": f"{a.name},{b.name}",
        "MULTICA_DAEMON_MAX_CONCURRENT_TASKS": "2",
        "MULTICA_COMMAND_PATH": "/usr/bin/python3",
        "MULTICA_COMMAND_ARGS": str(agent),
        "MULTICA_EMBEDDED_REPOS": url,
    }
    async with root_daemon(passable_tmp, a, **settings) as (_, api):
        env = {"SHARED": str(shared), **calls({"url": url}, first=BOTH_RUNNING, then=OWNERS)}
        custom = {"name": "Bot", "custom_env": env}
        ids = [
            str((await api.create_task("Check out.", backend="command", agent=custom))["id"])
            for _ in range(2)
        ]
        done = [await wait_task(api, task_id, within=90) for task_id in ids]
    outcomes = [(d["status"], d["error"], d["output"]) for d in done]
    assert [d["status"] for d in done] == ["completed"] * 2, outcomes
    reports = [json.loads(d["output"]) for d in done]
    assert sorted(r["uid"] for r in reports) == sorted((a.uid, b.uid))
    for report in reports:
        assert report["answers"][0]["status"] == 200, report["answers"]
        assert report["owners"] == [report["uid"]], report
