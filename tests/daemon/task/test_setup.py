"""Tests for what a task's agent is given before it starts."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from backends.base import NullObserver
from daemon.config import Settings
from daemon.protocol.models import Task
from daemon.services import AgentReach
from daemon.task.setup.spec import agent_spec, prepare
from daemon.workdirs.names import task_dir_name


def _task(custom_env: dict[str, str]) -> Task:
    return Task.model_validate(
        {
            "id": "task-1",
            "workspace_id": "ws-1",
            "agent_id": "ag-1",
            "issue_id": "I-1",
            "agent": {"id": "ag-1", "name": "Coder", "custom_env": custom_env},
            "auth_token": "mat_task_secret",
        }
    )


def test_custom_env_names_the_daemon_keeps_are_skipped_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`custom_env` may not set PATH or MULTICA_*: those are skipped, and one line says which."""
    settings = Settings.from_env({"HOME": str(tmp_path), "MULTICA_SERVER_URL": "http://x.test"})
    task = _task({"PATH": "/evil", "MULTICA_TOKEN": "stolen", "MY_FLAG": "1"})
    dirs, mcp = prepare(tmp_path / "ws", task, "claude")
    reach = AgentReach("http://x.test", {"PATH": "/usr/bin"}, 19514, None)
    with caplog.at_level(logging.WARNING, logger="daemon.task.setup.spec"):
        spec = agent_spec(
            task, "claude", dirs, settings, NullObserver(), mcp, reach, 0, processes=None
        )
    assert spec.env["MY_FLAG"] == "1"
    assert spec.env["MULTICA_TOKEN"] == "mat_task_secret" and spec.env["PATH"] != "/evil"
    assert [r.getMessage() for r in caplog.records] == [
        "task task1: custom_env may not set MULTICA_TOKEN, PATH"
    ]


@pytest.mark.parametrize("planted", [".multica", ".claude"])
def test_a_failed_preparation_leaves_no_temp_dir(tmp_path: Path, planted: str) -> None:
    """When a marker or a skill cannot be written (here a file planted where a directory goes;
    a full disk alike), no `multica-task-*` directory is left behind."""
    task = Task.model_validate(
        {
            **_task({}).model_dump(),
            "agent": {"id": "ag-1", "name": "Coder", "skills": [{"name": "lint", "content": "x"}]},
        }
    )
    work = tmp_path / "ws" / "ws-1" / task_dir_name("task-1") / "workdir"
    work.mkdir(parents=True)
    (work / planted).write_text("in the way")
    with pytest.raises(OSError):
        prepare(tmp_path / "ws", task, "claude")
    assert list(work.parent.glob("multica-task-*")) == []


def test_the_spec_holds_the_tasks_mcp_servers_in_memory(tmp_path: Path) -> None:
    """The MCP configuration reaches the spec as data as well as a file: a backend that sends
    it in-band never has to read the file the agent can replace."""
    settings = Settings.from_env({"HOME": str(tmp_path), "MULTICA_SERVER_URL": "http://x.test"})
    servers = {"mcpServers": {"docs": {"command": "docs-mcp"}}}
    task = _task({}).model_copy(
        update={"agent": _task({}).agent.model_copy(update={"mcp_config": servers})}
    )
    dirs, mcp = prepare(tmp_path / "ws", task, "codex")
    reach = AgentReach("http://x.test", {"PATH": "/usr/bin"}, 19514, None)
    spec = agent_spec(task, "acp", dirs, settings, NullObserver(), mcp, reach, 0, processes=None)
    assert spec.mcp == servers and spec.mcp_config is not None


@pytest.mark.parametrize(
    ("backend", "inline"),
    [("kimi", True), ("openclaw", True), ("claude", False), ("copilot", False), ("cursor", False)],
)
def test_only_a_cli_that_reads_no_brief_file_gets_it_in_the_prompt(
    tmp_path: Path, backend: str, inline: bool
) -> None:
    """Kimi and OpenClaw (and Trae, QwenPaw) load no brief file: theirs comes as
    instructions; the others find it in the work directory, and are not sent it twice."""
    settings = Settings.from_env({"HOME": str(tmp_path), "MULTICA_SERVER_URL": "http://x.test"})
    task = _task({})
    dirs, mcp = prepare(tmp_path / "ws", task, backend)
    reach = AgentReach("http://x.test", {"PATH": "/usr/bin"}, 19514, None)
    spec = agent_spec(task, backend, dirs, settings, NullObserver(), mcp, reach, 0, processes=None)
    assert ("Multica Agent Runtime" in spec.instructions) is inline
