"""MULTICA_AGENT_USER: checked at start-up, and a task's place handed to that user while the
daemon's own stays root's (real users made for the test, real files; needs root)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from backends.base import NullObserver
from backends.process.identity import AgentUser
from daemon.boundary.agent_user import resolve, take_over
from daemon.config import Settings
from daemon.errors import ConfigError
from daemon.protocol.models import Task
from daemon.services import AgentReach
from daemon.task.setup.spec import agent_spec, prepare
from tests.daemon_child import run_cli
from tests.fakes.system_user import system_user

pytestmark = pytest.mark.root


def _task() -> Task:
    return Task.model_validate(
        {
            "id": "task-1",
            "workspace_id": "ws-1",
            "agent_id": "ag-1",
            "issue_id": "I-1",
            "auth_token": "mat_task_secret",
            "agent": {
                "id": "ag-1",
                "name": "Coder",
                "mcp_config": {"mcpServers": {}},
                "skills": [{"name": "Lint", "content": "run ruff", "files": []}],
            },
        }
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_name_or_a_uid_resolves_to_the_users_account(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """Name and numeric uid give the same account: ids, groups and HOME from the database."""
    assert resolve(agent_user.name) == resolve(str(agent_user.uid)) == agent_user
    assert agent_user.gid in agent_user.groups and Path(agent_user.home).is_dir()


def test_empty_or_the_daemons_own_user_changes_nothing() -> None:
    """Unset, or naming the user the daemon already runs as: agents run as they always did."""
    assert resolve("") is None
    assert resolve(str(os.geteuid())) is None


def test_an_unknown_user_stops_start_up() -> None:
    """A name no account has is one error naming the variable."""
    with pytest.raises(ConfigError, match=r"^MULTICA_AGENT_USER='no-such-user-x' .*no such user"):
        resolve("no-such-user-x")


def test_a_daemon_that_is_not_root_cannot_switch(agent_user: AgentUser) -> None:
    """A daemon running as another uid cannot start agents as this user: one error. (The uid
    is the seam: the test process, root, cannot become another user and come back.)"""
    with pytest.raises(ConfigError, match=r"^MULTICA_AGENT_USER=.*not root"):
        resolve(agent_user.name, euid=agent_user.uid + 1)


def test_a_user_without_its_home_stops_start_up() -> None:
    """An account whose home directory is missing is refused, naming the directory."""
    with system_user(create_home=False) as homeless, pytest.raises(ConfigError) as raised:
        resolve(homeless.name)
    assert str(raised.value).startswith(f"MULTICA_AGENT_USER={homeless.name!r} is invalid")
    assert f"home directory {homeless.home!r} does not exist" in str(raised.value)


def test_a_workspaces_root_the_user_cannot_reach_is_refused(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """A root below an owner-only directory (the state directory, /root) is refused."""
    closed = passable_tmp / "state"
    closed.mkdir(mode=0o700)
    with pytest.raises(ConfigError, match=r"^MULTICA_WORKSPACES_ROOT=.*cannot pass through"):
        take_over(agent_user, closed / "workspaces", closed)


@pytest.mark.parametrize("writable", ["root's parent", "state dir's parent"])
def test_a_directory_the_user_could_move_aside_is_refused(
    agent_user: AgentUser, passable_tmp: Path, writable: str
) -> None:
    """The user may not write a parent of the root or of the state directory: it could
    rename ours and put its own in place (a sticky directory such as /tmp is fine)."""
    shared = passable_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    root, state = passable_tmp / "workspaces", passable_tmp / "state"
    if writable == "root's parent":
        root = shared / "workspaces"
    else:
        state = shared / "state"
    state.mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"may write .*shared.*move the directory aside"):
        take_over(agent_user, root, state)


@pytest.mark.anyio
@pytest.mark.parametrize("problem", ["unknown", "homeless", "unreachable root"])
async def test_the_cli_exits_2_with_one_line_naming_the_variable(
    passable_tmp: Path, problem: str
) -> None:
    """`agent-daemon run` stops before any agent runs: exit 2, one line naming the variable,
    no traceback."""
    closed = passable_tmp / "closed"
    closed.mkdir(mode=0o700)
    with system_user(create_home=problem != "homeless") as made:
        name = "no-such-user-x" if problem == "unknown" else made.name
        root = closed if problem == "unreachable root" else passable_tmp
        env = {
            "HOME": str(passable_tmp),
            "PATH": os.environ.get("PATH", ""),
            "MULTICA_AGENT_USER": name,
            "MULTICA_WORKSPACES_ROOT": str(root / "ws"),
            "MULTICA_DAEMON_HEALTH_ADDR": "127.0.0.1:0",
        }
        code, _, err = await run_cli("run", env=env)
    lines = err.strip().splitlines()
    assert (code, len(lines)) == (2, 1), err
    var = "MULTICA_WORKSPACES_ROOT" if problem == "unreachable root" else "MULTICA_AGENT_USER"
    assert lines[0].startswith(f"agent-daemon: {var}=")
    assert f"MULTICA_AGENT_USER={name}" in lines[0] or f"={name!r} is invalid" in lines[0]


def test_take_over_sets_the_boundary_modes(agent_user: AgentUser, passable_tmp: Path) -> None:
    """The root and any parent the daemon creates are root's and 0711 (passable, not
    listable); a state dir that came open (a mounted volume's 0777) is made 0700."""
    root, state = passable_tmp / "new" / "workspaces", passable_tmp / "state"
    state.mkdir()
    state.chmod(0o777)
    take_over(agent_user, root, state)
    assert [(_mode(p), p.stat().st_uid) for p in (root.parent, root)] == [(0o711, 0)] * 2
    assert _mode(state) == 0o700


def test_the_task_place_is_the_agent_users_and_the_path_to_it_passable(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """Work dir, config root, temp dir, markers, skills, brief and MCP file belong to the
    agent user; its task dir is 0700, the workspace dir root's 0711; HOME/USER in the env."""
    root = passable_tmp / "workspaces"
    take_over(agent_user, root, passable_tmp / "state")
    env = {"HOME": str(passable_tmp), "MULTICA_AGENT_USER": agent_user.name}
    settings = Settings.from_env({**env, "MULTICA_WORKSPACES_ROOT": str(root)})
    assert settings.agent_identity == agent_user
    task = _task()
    dirs, mcp = prepare(root, task, "claude", agent_user)
    reach = AgentReach("http://x.test", {"PATH": "/usr/bin", "HOME": "/root"}, 19514, None)
    spec = agent_spec(task, "claude", dirs, settings, NullObserver(), mcp, reach, 0, processes=None)
    assert spec.user == agent_user
    assert [spec.env[k] for k in ("HOME", "USER", "LOGNAME")] == [
        agent_user.home,
        agent_user.name,
        agent_user.name,
    ]
    workspace = dirs.env_root.parent
    assert (workspace.stat().st_uid, _mode(workspace)) == (0, 0o711)
    assert (dirs.env_root.stat().st_uid, _mode(dirs.env_root)) == (agent_user.uid, 0o700)
    given = [p for p in dirs.env_root.rglob("*")]
    assert mcp is not None and {mcp, dirs.work_dir / "CLAUDE.md"} <= set(given)
    assert dirs.work_dir / ".claude" / "skills" / "lint" / "SKILL.md" in given
    assert dirs.temp_dir in given and dirs.config_root in given
    assert [p for p in given if p.lstat().st_uid != agent_user.uid] == []
    assert [p for p in given if p.lstat().st_gid != agent_user.gid] == []


def test_a_link_the_agent_left_is_replaced_and_its_target_keeps_its_owner(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """A `CLAUDE.md` link to a root file and a `.claude` link to a root directory: the brief
    and skills replace or refuse them, and nothing outside the work dir changes owner."""
    root = passable_tmp / "workspaces"
    take_over(agent_user, root, passable_tmp / "state")
    task = _task().model_copy(update={"agent": _task().agent.model_copy(update={"skills": []})})
    dirs, _ = prepare(root, task, "claude", agent_user)
    secret = passable_tmp / "secret"
    secret.write_text("root's")
    secret.chmod(0o600)
    (dirs.work_dir / "CLAUDE.md").symlink_to(secret)
    settings = Settings.from_env(
        {
            "HOME": str(passable_tmp),
            "MULTICA_AGENT_USER": agent_user.name,
            "MULTICA_WORKSPACES_ROOT": str(root),
        }
    )
    reach = AgentReach("http://x.test", {"PATH": "/usr/bin"}, 19514, None)
    agent_spec(task, "claude", dirs, settings, NullObserver(), None, reach, 0, processes=None)
    brief = dirs.work_dir / "CLAUDE.md"
    assert not brief.is_symlink() and brief.stat().st_uid == agent_user.uid
    assert (secret.read_text(), secret.stat().st_uid, _mode(secret)) == ("root's", 0, 0o600)


def test_a_prior_work_dir_of_another_user_is_not_reused(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """A work dir left by root's agents is not continued by the agent user (it could not
    write there): the follow-up gets a fresh directory of its own."""
    root = passable_tmp / "workspaces"
    take_over(agent_user, root, passable_tmp / "state")
    first, _ = prepare(root, _task(), "claude")  # as root, before the agent user was set
    follow_up = _task().model_copy(update={"id": "task-2", "prior_work_dir": str(first.work_dir)})
    again, _ = prepare(root, follow_up, "claude", agent_user)
    assert (again.reused, again.work_dir.stat().st_uid) == (False, agent_user.uid)
    assert _mode(again.env_root.parent) == 0o711  # root's 0700 one, opened for passing
    marker = json.loads((again.work_dir / ".multica" / "daemon_task_context.json").read_text())
    assert marker["issue_id"] == "I-1"
    third = _task().model_copy(update={"id": "task-3", "prior_work_dir": str(again.work_dir)})
    assert prepare(root, third, "claude", agent_user)[0].reused


def test_a_prior_work_dir_of_another_pool_user_is_not_reused(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """With a pool, a follow-up handed another user than its prior task's gets a fresh work dir
    of its own (the prior one, and any checkout in it, stays its first uid's); handed the same
    user, it continues the prior one."""
    root = passable_tmp / "workspaces"
    take_over(agent_user, root, passable_tmp / "state")
    first, _ = prepare(root, _task(), "claude", agent_user)
    with system_user() as other:
        follow_up = _task().model_copy(
            update={"id": "task-2", "prior_work_dir": str(first.work_dir)}
        )
        elsewhere, _ = prepare(root, follow_up, "claude", other)
        assert not elsewhere.reused and elsewhere.work_dir != first.work_dir
        assert {elsewhere.work_dir.stat().st_uid, elsewhere.env_root.stat().st_uid} == {other.uid}
        assert {first.work_dir.stat().st_uid, first.env_root.stat().st_uid} == {agent_user.uid}
    third = _task().model_copy(update={"id": "task-3", "prior_work_dir": str(first.work_dir)})
    again, _ = prepare(root, third, "claude", agent_user)
    assert again.reused and again.work_dir == first.work_dir
