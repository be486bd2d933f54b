"""Tests for the runtime brief written into the agent's work directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.protocol.models import Task
from daemon.task.setup.runtime_brief import brief_file, runtime_brief, write_brief


def _task(**fields: Any) -> Task:
    agent = {"id": "ag-1", "name": "Coder", "instructions": "Prefer small diffs."}
    return Task.model_validate({"id": "t-1", "agent_id": "ag-1", "agent": agent, **fields})


def test_claude_reads_claude_md_and_the_others_agents_md() -> None:
    """Claude Code gets CLAUDE.md, Gemini CLI GEMINI.md, Qwen Code QWEN.md; Codex, Pi and the
    others AGENTS.md."""
    assert brief_file("claude") == "CLAUDE.md"
    assert brief_file("gemini") == "GEMINI.md"
    assert brief_file("qwen") == "QWEN.md"
    assert brief_file("codebuddy") == "CODEBUDDY.md"
    assert brief_file("cursor") == "AGENTS.md"
    assert brief_file("pi") == "AGENTS.md"
    assert brief_file("opencode") == "AGENTS.md"
    assert brief_file("codex") == "AGENTS.md"
    assert brief_file("command") == "AGENTS.md"


def test_the_brief_carries_identity_instructions_and_workspace_context() -> None:
    """Name, id and the agent's own instructions, then the workspace's context."""
    text = runtime_brief(_task(issue_id="I-1", workspace_context="We ship on Fridays."))
    assert text.startswith("# Multica Agent Runtime\n\n")
    assert "**You are: Coder** (ID: `ag-1`)\n\nPrefer small diffs.\n\n" in text
    assert "## Workspace context\n\nWe ship on Fridays.\n\n" in text
    assert "`multica issue get <id> --output json`" in text


def test_the_workflow_follows_the_task_kind() -> None:
    """A quick-create brief lists its one command; a chat brief treats the reply as the answer."""
    quick = runtime_brief(_task(quick_create_prompt="x"))
    assert "This task needs one command" in quick
    assert "`multica issue get <id> --output json`" not in quick
    assert "This is a chat" in runtime_brief(_task(chat_session_id="c"))
    assert "no issue is assigned to it" in runtime_brief(_task(autopilot_run_id="r"))


def test_an_agent_without_identity_gets_no_identity_section() -> None:
    """No name, id or instructions: the section is left out."""
    task = Task.model_validate({"id": "t", "issue_id": "I-1"})
    assert "## Agent identity" not in runtime_brief(task)


def test_the_brief_is_written_under_the_backends_file(tmp_path: Path) -> None:
    """write_brief puts the text in CLAUDE.md for Claude Code and returns the path."""
    path = write_brief(tmp_path, "claude", _task(issue_id="I-1", project_id="p", project_title="W"))
    assert path == tmp_path / "CLAUDE.md"
    assert "## Project\n\nThis task belongs to the project **W**.\n\n" in path.read_text()


def test_a_planted_symlink_is_replaced_not_followed(tmp_path: Path) -> None:
    """A CLAUDE.md symlink left in the work dir is replaced; the file it pointed at is intact."""
    target = tmp_path / "bashrc"
    target.write_text("original")
    work = tmp_path / "work"
    work.mkdir()
    (work / "CLAUDE.md").symlink_to(target)
    write_brief(work, "claude", _task(issue_id="I-1"))
    assert target.read_text() == "original"
    assert not (work / "CLAUDE.md").is_symlink()
    assert (work / "CLAUDE.md").read_text().startswith("# Multica Agent Runtime")


def test_the_brief_lists_the_repositories_and_how_to_check_them_out() -> None:
    """A task with repositories names each (with its description) and `multica repo checkout`;
    one without has no such section."""
    task = Task.model_validate(
        {
            "id": "t1",
            "issue_id": "i1",
            "repos": [
                {"url": "https://github.com/o/app.git", "description": "the app"},
                {"url": "git@github.com:o/lib"},
                "not a repo",
            ],
        }
    )
    brief = runtime_brief(task)
    assert "## Repositories" in brief and "multica repo checkout <url>" in brief
    assert "- https://github.com/o/app.git — the app\n- git@github.com:o/lib\n" in brief
    assert "## Repositories" not in runtime_brief(Task(id="t2", issue_id="i2"))
