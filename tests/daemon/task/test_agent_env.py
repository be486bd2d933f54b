"""Tests for the environment a task's agent gets."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from daemon.errors import TaskTokenError
from daemon.protocol.models import Task
from daemon.task.setup.agent_env import (
    TaskPlace,
    agent_env,
    blocked_custom_keys,
    make_temp_dir,
    public_url,
    task_token,
)


def _task(**fields: Any) -> Task:
    body: dict[str, Any] = {
        "id": "task-1",
        "workspace_id": "ws-1",
        "agent_id": "ag-1",
        "agent": {"id": "ag-1", "name": "Coder", "custom_env": {}},
        "auth_token": "mat_task_secret",
    }
    body.update(fields)
    return Task.model_validate(body)


def _place(tmp_path: Path, **fields: Any) -> TaskPlace:
    values: dict[str, Any] = {
        "server_url": "https://api.example.test",
        "work_dir": tmp_path / "work",
        "temp_dir": tmp_path / "tmp",
        "config_root": tmp_path / "config",
        "workspaces_root": tmp_path / "ws",
        "health_port": 19514,
        "slot": 3,
        "require_task_token": True,
    }
    values.update(fields)
    return TaskPlace(**values)


def test_agent_gets_every_variable_the_multica_cli_needs(tmp_path: Path) -> None:
    """Token, server, workspace, agent, task, port, slot, roots and a per-task temp dir."""
    env = agent_env({"PATH": "/usr/bin"}, _task(), _place(tmp_path))
    assert env["MULTICA_TOKEN"] == "mat_task_secret"
    assert env["MULTICA_SERVER_URL"] == "https://api.example.test"
    assert env["MULTICA_WORKSPACE_ID"] == "ws-1"
    assert (env["MULTICA_AGENT_ID"], env["MULTICA_AGENT_NAME"]) == ("ag-1", "Coder")
    assert env["MULTICA_TASK_ID"] == "task-1"
    assert (env["MULTICA_DAEMON_PORT"], env["MULTICA_TASK_SLOT"]) == ("19514", "3")
    assert env["MULTICA_TASK_CONFIG_ROOT"] == str(tmp_path / "config")
    assert env["MULTICA_TASK_WORKSPACES_ROOT"] == str(tmp_path / "ws")
    temp = str(tmp_path / "tmp")
    assert (env["TMPDIR"], env["TMP"], env["TEMP"]) == (temp, temp, temp)
    assert env["PATH"] == "/usr/bin"


def test_a_quick_create_run_carries_the_marker_multicas_cli_stamps_on_its_issue(
    tmp_path: Path,
) -> None:
    """A quick-create's agent gets the task id (and its attachments) that `multica issue
    create` stamps on the new issue, so the server finds it; other runs do not."""
    quick = _task(quick_create_prompt="a bug: login fails", quick_create_attachment_ids=["a1"])
    env = agent_env({"PATH": "/usr/bin"}, quick, _place(tmp_path))
    assert env["MULTICA_QUICK_CREATE_TASK_ID"] == "task-1"
    assert json.loads(env["MULTICA_QUICK_CREATE_ATTACHMENT_IDS"]) == ["a1"]
    plain = agent_env({"PATH": "/usr/bin"}, _task(), _place(tmp_path))
    assert "MULTICA_QUICK_CREATE_TASK_ID" not in plain
    assert "MULTICA_QUICK_CREATE_ATTACHMENT_IDS" not in plain


def test_an_autopilot_run_carries_its_run_and_autopilot_ids(tmp_path: Path) -> None:
    """The autopilot's ids reach the agent as Multica's daemon sets them."""
    task = _task(autopilot_run_id="run-7", autopilot_id="ap-2")
    env = agent_env({"PATH": "/usr/bin"}, task, _place(tmp_path))
    assert (env["MULTICA_AUTOPILOT_RUN_ID"], env["MULTICA_AUTOPILOT_ID"]) == ("run-7", "ap-2")


def test_the_daemons_own_variables_never_reach_the_agent(tmp_path: Path) -> None:
    """The daemon's token, settings and systemd notify socket are dropped from the base env."""
    base = {
        "MULTICA_TOKEN": "mul_daemon_login",
        "MULTICA_DAEMON_POLL_INTERVAL": "1s",
        "NOTIFY_SOCKET": "/run/notify",
        "LANG": "C.UTF-8",
    }
    env = agent_env(base, _task(), _place(tmp_path))
    assert "mul_daemon_login" not in env.values()
    assert "MULTICA_DAEMON_POLL_INTERVAL" not in env
    assert "NOTIFY_SOCKET" not in env
    assert env["LANG"] == "C.UTF-8"


def test_a_token_that_is_not_task_scoped_is_refused(tmp_path: Path) -> None:
    """Against a Multica server a non-`mat_` or missing token stops the agent from starting."""
    with pytest.raises(TaskTokenError, match="not task-scoped"):
        agent_env({}, _task(auth_token="mul_owner"), _place(tmp_path))
    with pytest.raises(TaskTokenError, match="did not provide"):
        task_token(_task(auth_token=""), require_task_token=True)


def test_any_token_passes_when_the_server_does_not_scope_them(tmp_path: Path) -> None:
    """The embedded server's tokens are used as they come."""
    env = agent_env({}, _task(auth_token="plain"), _place(tmp_path, require_task_token=False))
    assert env["MULTICA_TOKEN"] == "plain"


def test_credentials_in_the_server_url_are_stripped(tmp_path: Path) -> None:
    """A user and password in the server URL never reach the agent."""
    url = "https://alice:hunter2@api.example.test:8443/base"
    env = agent_env({}, _task(), _place(tmp_path, server_url=url))
    assert env["MULTICA_SERVER_URL"] == "https://api.example.test:8443/base"
    assert public_url("http://u@[::1]:80/") == "http://[::1]:80/"
    assert public_url("http://h.test/x") == "http://h.test/x"


def test_the_multica_binary_directory_goes_first_on_path(tmp_path: Path) -> None:
    """With `multica` installed, its directory precedes the inherited PATH."""
    place = _place(tmp_path, multica_bin=Path("/opt/multica/bin/multica"))
    assert agent_env({"PATH": "/usr/bin"}, _task(), place)["PATH"] == "/opt/multica/bin:/usr/bin"
    assert agent_env({}, _task(), place)["PATH"] == "/opt/multica/bin"
    inherited = {"PATH": "/usr/bin:/opt/multica/bin:/bin"}
    assert agent_env(inherited, _task(), place)["PATH"] == "/opt/multica/bin:/usr/bin:/bin"


def test_custom_env_goes_on_top_except_the_daemons_names(tmp_path: Path) -> None:
    """custom_env overrides the base, but cannot replace the task token, PATH or the temp dir."""
    custom = {
        "ANTHROPIC_BASE_URL": "http://proxy",
        "LANG": "de_DE.UTF-8",
        "MULTICA_TOKEN": "stolen",
        "multica_task_id": "x",
        "PATH": "/evil",
        "TMPDIR": "/shared",
    }
    task = _task(agent={"id": "ag-1", "name": "Coder", "custom_env": custom})
    env = agent_env({"LANG": "C", "PATH": "/usr/bin"}, task, _place(tmp_path))
    assert env["ANTHROPIC_BASE_URL"] == "http://proxy"
    assert env["LANG"] == "de_DE.UTF-8"
    assert env["MULTICA_TOKEN"] == "mat_task_secret"
    assert "multica_task_id" not in env
    assert (env["PATH"], env["TMPDIR"]) == ("/usr/bin", str(tmp_path / "tmp"))
    assert blocked_custom_keys(custom) == ["MULTICA_TOKEN", "PATH", "TMPDIR", "multica_task_id"]


def test_each_task_gets_its_own_private_temp_dir(tmp_path: Path) -> None:
    """Two calls give two owner-only directories under the base."""
    first, second = make_temp_dir(tmp_path / "t"), make_temp_dir(tmp_path / "t")
    assert first != second
    assert first.parent == tmp_path / "t"
    assert stat.S_IMODE(first.stat().st_mode) == 0o700
