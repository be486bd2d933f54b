"""A project's local directory through the daemon, against the Multica-faithful server: in
place (the user's folder is the work dir, one task at a time, the wait told to the server) and
as a worktree (a branch of the user's repository, their tree untouched), with real git
repositories and real agent processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from backends.process.identity import AgentUser
from daemon.logs import short_id
from tests.fakes.multica_local import local_directory
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import RunningDaemon, eventually, running_daemon

pytestmark = pytest.mark.anyio

# The agent: writes what it saw into `<report dir>/<task id>.json` (its directory, the brief
# file, the files of its folder), waits while a `hold-<task id>` file says so, then does what
# its prompt asks (`PLEASE WRITE`: adds and changes files; else only reads).
AGENT = r"""
import json, os, pathlib, sys, time
prompt = sys.stdin.read()
task = os.environ["MULTICA_TASK_ID"]
reports = pathlib.Path(os.environ["REPORT_DIR"])
here = pathlib.Path.cwd()
seen = {
    "cwd": str(here),
    "workdir": os.environ.get("MULTICA_WORKDIR"),
    "prompt": prompt,
    "brief": (here / "AGENTS.md").read_text() if (here / "AGENTS.md").exists() else None,
    "files": sorted(str(p.relative_to(here)) for p in here.rglob("*")
                    if ".git" not in p.parts),
    "marker": (here / ".multica/daemon_task_context.json").is_file(),
}
(reports / f"{task}.started").write_text("")
while (reports / f"hold-{task}").exists():
    time.sleep(0.02)
if "PLEASE WRITE" in prompt:
    (here / "agent.txt").write_text("made by the agent\n")
    (here / "tracked.txt").write_text("changed by the agent\n")
(reports / f"{task}.json").write_text(json.dumps(seen))
print(json.dumps({"type": "result", "output": "done"}))
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    )
    return done.stdout


def user_repo(path: Path) -> Path:
    """A user's repository: a committed file and brief, an uncommitted change, an untracked
    file, an ignored file."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "user@example.com")
    git(path, "config", "user.name", "User")
    (path / "tracked.txt").write_text("committed\n")
    (path / "AGENTS.md").write_text("# The user's own brief\n")
    (path / ".gitignore").write_text("build/\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    (path / "tracked.txt").write_text("committed\nuncommitted edit\n")
    (path / "untracked.txt").write_text("new, not added\n")
    (path / "build").mkdir()
    (path / "build" / "out.bin").write_text("ignored\n")
    return path


def snapshot(path: Path, *, with_git: bool = True) -> dict[str, bytes]:
    """Every file of the folder with its bytes (the repository's own files too, but the
    index git refreshes on a read)."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != "index" and (with_git or ".git" not in p.parts)
    }


@asynccontextmanager
async def daemon(
    tmp_path: Path, lease_every: float = 15.0
) -> AsyncIterator[tuple[MulticaFake, RunningDaemon, Path]]:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path / "home"),
        "REPORT_DIR": str(reports),
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    async with (
        multica_server() as fake,
        running_daemon(
            tmp_path / "daemon",
            fake.url,
            base_env=env,
            prepare_lease_every=lease_every,
            MULTICA_COMMAND_PATH=sys.executable,
            MULTICA_COMMAND_ARGS=str(agent),
        ) as d,
    ):
        yield fake, d, reports


def gone(path: str) -> bool:
    """Nothing (not even a dangling link) is left at `path`."""
    return not os.path.lexists(path)


def seen(reports: Path, task_id: str) -> dict[str, Any]:
    return json.loads((reports / f"{task_id}.json").read_text())


def queue(fake: MulticaFake, d: RunningDaemon, folder: Path, first_line: str, **ref: str) -> str:
    resources = [local_directory(str(folder), d.worker.daemon_id, **ref)]
    return fake.queue_issue(
        provider="command",
        prompt="PLEASE WRITE\n" if first_line == "write" else "Only read.\n",
        project_resources=resources,
        agent={"name": "Builder"},
    )


async def test_in_place_the_agent_works_in_the_users_folder_which_is_left_as_it_was(
    tmp_path: Path,
) -> None:
    """The agent's work dir is the user's folder: it sees the user's brief with the daemon's
    block appended and the daemon's marker; afterwards only the agent's own changes are
    there, the user's brief byte for byte, and `complete` names the folder."""
    folder = user_repo(tmp_path / "project")
    before = snapshot(folder)
    async with daemon(tmp_path) as (fake, d, reports):
        task = await fake.finished(queue(fake, d, folder, "write"))
    assert task.status == "completed", task.error
    saw = seen(reports, task.id)
    assert saw["cwd"] == str(folder) == saw["workdir"]
    assert saw["brief"].startswith("# The user's own brief\n\n\n<!-- BEGIN MULTICA-RUNTIME")
    assert saw["marker"] is True
    assert "untracked.txt" in saw["files"] and "build/out.bin" in saw["files"]
    after = snapshot(folder)
    assert after.pop("agent.txt") == b"made by the agent\n"
    assert after.pop("tracked.txt") == b"changed by the agent\n"
    before.pop("tracked.txt")
    assert after == before  # the brief, the marker's folder, every other file: as they were
    assert not (folder / ".multica").exists()
    assert task.work_dir == str(folder)
    assert task.branch_name == task.durable_work_dir == ""
    meta = json.loads(next((tmp_path / "daemon").rglob(".gc_meta.json")).read_text())
    assert meta["local_directory"] is True


async def test_in_place_tasks_on_one_folder_run_one_at_a_time_and_a_chat_does_not_wait(
    tmp_path: Path,
) -> None:
    """The second task waits (the server hears `waiting_local_directory` with the folder's
    label, never its path, and its prepare lease is renewed meanwhile) until the first is
    reported; a chat turn runs at once, told the folder is shared."""
    folder = user_repo(tmp_path / "project")
    async with daemon(tmp_path, lease_every=0.1) as (fake, d, reports):
        first = queue(fake, d, folder, "write", label="My Project")
        (reports / f"hold-{first}").write_text("")
        await eventually(lambda: (reports / f"{first}.started").exists())
        second = queue(fake, d, folder, "read", label="My Project")
        await eventually(lambda: fake.tasks[second].status == "waiting_local_directory")
        chat = fake.queue_chat(
            "read",
            provider="command",
            project_resources=[local_directory(str(folder), d.worker.daemon_id)],
        )
        assert (await fake.finished(chat)).status == "completed"
        assert not (reports / f"{second}.started").exists()
        renewed = f"/tasks/{second}/prepare-lease"
        await eventually(lambda: sum(r.path.endswith(renewed) for r in fake.requests) >= 2)
        (reports / f"hold-{first}").unlink()
        done = [await fake.finished(first), await fake.finished(second)]
    assert [t.status for t in done] == ["completed", "completed"]
    assert fake.tasks[second].waits == [f"My Project (held by task {short_id(first)})"]
    assert str(folder) not in json.dumps(fake.seen("wait-local-directory")[0].body)
    assert fake.tasks[first].ended < fake.tasks[second].ended
    assert "## Shared working directory" in seen(reports, chat)["prompt"]
    assert "## Shared working directory" not in seen(reports, second)["prompt"]


async def test_a_task_cancelled_while_it_waits_never_runs(tmp_path: Path) -> None:
    """Cancelled while waiting for the folder: the wait ends, the agent never starts and the
    next task still gets the folder."""
    folder = user_repo(tmp_path / "project")
    async with daemon(tmp_path) as (fake, d, reports):
        first = queue(fake, d, folder, "read")
        (reports / f"hold-{first}").write_text("")
        await eventually(lambda: (reports / f"{first}.started").exists())
        second = queue(fake, d, folder, "read")
        await eventually(lambda: fake.tasks[second].status == "waiting_local_directory")
        fake.cancel(second)
        await eventually(lambda: second not in d.worker.runs)
        (reports / f"hold-{first}").unlink()
        third = queue(fake, d, folder, "read")
        assert (await fake.finished(third)).status == "completed"
    assert not (reports / f"{second}.started").exists()
    assert fake.tasks[second].status == "cancelled"


@pytest.mark.parametrize(
    ("path", "ref", "words"),
    [
        ("relative/dir", {}, "must be absolute"),
        ("/tmp", {}, "protected system root"),
        ("{missing}", {}, "does not exist"),
        ("{folder}", {"mode": "parallel"}, 'does not support execution_mode "parallel"'),
        ("{plain}", {"mode": "worktree"}, "is not a git repository"),
    ],
)
async def test_a_folder_that_cannot_be_used_fails_the_task_saying_why(
    tmp_path: Path, path: str, ref: dict[str, str], words: str
) -> None:
    """A bad path or mode fails the task `local_directory_error`, with a sentence the user
    can act on; nothing runs."""
    folder = user_repo(tmp_path / "project")
    plain = tmp_path / "plain"
    plain.mkdir()
    where = path.format(folder=folder, missing=tmp_path / "gone", plain=plain)
    async with daemon(tmp_path) as (fake, d, reports):
        task = await fake.finished(queue(fake, d, Path(where), "write", **ref))
    assert task.status == "failed"
    assert task.failure_reason == "local_directory_error"
    assert words in task.error
    assert list(reports.iterdir()) == []


async def test_another_daemons_folder_is_not_this_ones(tmp_path: Path) -> None:
    """A resource bound to another daemon id leaves the task in its own work dir."""
    folder = user_repo(tmp_path / "project")
    async with daemon(tmp_path) as (fake, _d, reports):
        resources = [local_directory(str(folder), "another-daemon")]
        task_id = fake.queue_issue(
            provider="command", prompt="PLEASE WRITE\n", project_resources=resources
        )
        task = await fake.finished(task_id)
    assert task.status == "completed", task.error
    assert seen(reports, task.id)["cwd"] != str(folder)
    assert not (folder / "agent.txt").exists()


async def test_worktree_mode_delivers_a_branch_and_leaves_the_users_tree_untouched(
    tmp_path: Path,
) -> None:
    """The agent works in a worktree with the user's uncommitted and untracked state (not the
    ignored files); its work is committed on `agent/<agent>/<task key>` after a baseline of
    the user's state; the user's files, index and branch are as they were; `complete` names
    the branch and the folder, once the worktree is gone."""
    folder = user_repo(tmp_path / "project")
    before, status = snapshot(folder, with_git=False), git(folder, "status", "--porcelain")
    async with daemon(tmp_path) as (fake, d, reports):
        task = await fake.finished(queue(fake, d, folder, "write", mode="worktree"))
    assert task.status == "completed", task.error
    saw = seen(reports, task.id)
    assert saw["cwd"].endswith("/worktree") and saw["cwd"] != str(folder)
    assert "untracked.txt" in saw["files"] and "build/out.bin" not in saw["files"]
    assert saw["brief"].startswith("# The user's own brief\n\n\n<!-- BEGIN MULTICA-RUNTIME")
    key = task.id.replace("-", "")[-12:]
    assert task.branch_name == f"agent/builder/{key}"
    assert task.durable_work_dir == str(folder)
    assert snapshot(folder, with_git=False) == before
    assert git(folder, "status", "--porcelain") == status
    assert git(folder, "stash", "list") == ""
    assert git(folder, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    log = git(folder, "log", "--format=%s", f"main..{task.branch_name}").splitlines()
    assert log == [
        "chore(agent): uncommitted changes from task",
        "chore(agent): baseline — uncommitted work from the local directory",
    ]
    changed = git(folder, "diff", "--name-only", f"{task.branch_name}~1", task.branch_name)
    assert changed.split() == ["agent.txt", "tracked.txt"]  # the daemon's files are not there
    assert git(folder, "show", f"{task.branch_name}:AGENTS.md") == "# The user's own brief\n"
    assert git(folder, "worktree", "list").count("\n") == 1
    assert gone(saw["cwd"])


async def test_a_worktree_task_that_changed_nothing_leaves_no_branch(tmp_path: Path) -> None:
    """A read-only run: its branch is deleted; the folder still replaces the worktree."""
    folder = user_repo(tmp_path / "project")
    async with daemon(tmp_path) as (fake, d, _reports):
        task = await fake.finished(queue(fake, d, folder, "read", mode="worktree"))
    assert task.status == "completed", task.error
    assert task.branch_name == "" and task.durable_work_dir == str(folder)
    assert git(folder, "branch", "--list", "agent/*") == ""


async def test_worktree_tasks_on_one_folder_run_side_by_side(tmp_path: Path) -> None:
    """Two worktree tasks on one folder run at once, each on its own branch."""
    folder = user_repo(tmp_path / "project")
    async with daemon(tmp_path) as (fake, d, reports):
        first = queue(fake, d, folder, "write", mode="worktree")
        (reports / f"hold-{first}").write_text("")
        await eventually(lambda: (reports / f"{first}.started").exists())
        second = queue(fake, d, folder, "write", mode="worktree")
        assert (await fake.finished(second)).status == "completed"
        (reports / f"hold-{first}").unlink()
        done = await fake.finished(first)
    assert done.status == "completed"
    assert fake.tasks[first].branch_name != fake.tasks[second].branch_name
    assert fake.seen("wait-local-directory") == []


async def test_an_untracked_link_fails_the_worktree_rather_than_hide_it(tmp_path: Path) -> None:
    """The snapshot would differ from the user's tree: the task fails saying how to fix it,
    and no branch or worktree is left."""
    folder = user_repo(tmp_path / "project")
    (folder / "link").symlink_to("/etc/hostname")
    async with daemon(tmp_path) as (fake, d, _reports):
        task = await fake.finished(queue(fake, d, folder, "write", mode="worktree"))
    assert task.status == "failed" and task.failure_reason == "local_directory_error"
    assert "untracked files" in task.error and "in_place" in task.error
    assert git(folder, "branch", "--list", "agent/*") == ""
    assert git(folder, "worktree", "list").count("\n") == 1


# The agent user's agent: says who it is and what it could do in its folder.
USER_AGENT = r"""#!/bin/sh
echo "uid=$(id -u) cwd=$(pwd)"
if touch made-by-agent 2>/dev/null; then echo write=allowed; else echo write=refused; fi
if grep -q MULTICA-RUNTIME AGENTS.md 2>/dev/null; then echo brief=read; fi
"""


@pytest.mark.root
async def test_with_an_agent_user_the_folder_must_be_that_users(
    passable_tmp: Path, agent_user: AgentUser
) -> None:
    """A root daemon's agents run as the agent user: a folder of root's (0755) fails the task
    saying whose it is, untouched; a folder of the user's is worked in as that user, and the
    daemon's files there were that user's and are gone afterwards."""
    script = passable_tmp / "agent.sh"
    script.write_text(USER_AGENT)
    script.chmod(0o755)
    roots = passable_tmp / "roots"
    roots.mkdir(mode=0o755)
    mine = passable_tmp / "mine"
    mine.mkdir()
    os.chown(mine, agent_user.uid, agent_user.gid)
    async with (
        multica_server() as fake,
        running_daemon(
            passable_tmp / "daemon",
            fake.url,
            MULTICA_AGENT_USER=agent_user.name,
            MULTICA_COMMAND_PATH="/bin/sh",
            MULTICA_COMMAND_ARGS=str(script),
        ) as d,
    ):
        refused = await fake.finished(queue(fake, d, roots, "read"))
        worked = await fake.finished(queue(fake, d, mine, "read"))
    assert refused.status == "failed" and refused.failure_reason == "local_directory_error"
    assert f'run as "{agent_user.name}"' in refused.error and "uid 0" in refused.error
    assert list(roots.iterdir()) == []
    assert worked.status == "completed", worked.error
    assert f"uid={agent_user.uid} cwd={mine}" in worked.output
    assert "write=allowed" in worked.output and "brief=read" in worked.output
    assert sorted(p.name for p in mine.iterdir()) == ["made-by-agent"]
    assert (mine / "made-by-agent").stat().st_uid == agent_user.uid


async def test_work_that_cannot_be_committed_keeps_the_worktree_and_fails_saying_where(
    tmp_path: Path,
) -> None:
    """The user's repository signs every commit with a key the daemon does not have: the
    agent's work cannot be committed, so its worktree is kept, the task fails
    `local_directory_error` naming it, and the user's folder is untouched."""
    folder = tmp_path / "project"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / "tracked.txt").write_text("committed\n")
    git(folder, "add", "-A")
    git(folder, "-c", "user.email=u@x", "-c", "user.name=U", "commit", "-qm", "initial")
    git(folder, "config", "commit.gpgsign", "true")
    git(folder, "config", "gpg.program", "/bin/false")
    async with daemon(tmp_path) as (fake, d, reports):
        task = await fake.finished(queue(fake, d, folder, "write", mode="worktree"))
    saw = seen(reports, task.id)
    assert task.status == "failed" and task.failure_reason == "local_directory_error"
    assert "could not commit the agent's changes" in task.error
    assert f"preserved in the worktree at {saw['cwd']}" in task.error
    assert task.branch_name.startswith("agent/builder/") and task.durable_work_dir == ""
    assert (Path(saw["cwd"]) / "agent.txt").read_text() == "made by the agent\n"
    assert saw["cwd"] in git(folder, "worktree", "list")
    assert git(folder, "status", "--porcelain") == ""


async def test_a_worktree_snapshot_waits_for_an_in_place_task_on_the_folder(
    tmp_path: Path,
) -> None:
    """An in-place task holds the folder: a worktree task of another project on it waits for
    its snapshot (the server told), then runs once the folder is free."""
    folder = user_repo(tmp_path / "project")
    async with daemon(tmp_path) as (fake, d, reports):
        holder = queue(fake, d, folder, "read", label="Shared")
        (reports / f"hold-{holder}").write_text("")
        await eventually(lambda: (reports / f"{holder}.started").exists())
        tree = queue(fake, d, folder, "write", mode="worktree", label="Shared")
        await eventually(lambda: fake.tasks[tree].status == "waiting_local_directory")
        (reports / f"hold-{holder}").unlink()
        done = await fake.finished(tree)
    assert done.status == "completed", done.error
    assert done.waits == [f"Shared (held by task {short_id(holder)})"]
    assert done.branch_name.startswith("agent/builder/")
