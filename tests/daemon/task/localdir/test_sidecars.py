"""The daemon's files in a user's folder, and their exact undoing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.errors import LocalDirectoryError
from daemon.protocol.models import Skill
from daemon.task.localdir.sidecars import FolderWrites
from daemon.task.setup.skills import write_skill_tree


def _tree(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): ("<dir>" if p.is_dir() else p.read_text())
        for p in sorted(path.rglob("*"))
    }


def test_what_was_written_is_taken_out_and_the_users_files_stay(tmp_path: Path) -> None:
    """Marker, skills and brief go in; afterwards the folder is as it was, except a folder the
    daemon made that the user has put a file in meanwhile."""
    (tmp_path / ".claude" / "skills" / "deploy").mkdir(parents=True)
    (tmp_path / ".claude" / "skills" / "deploy" / "SKILL.md").write_text("the user's skill")
    (tmp_path / "AGENTS.md").write_text("# mine")
    before = _tree(tmp_path)
    writes = FolderWrites(tmp_path)
    writes.put_marker(".multica/daemon_task_context.json", '{"managed_by": "x"}')
    skills = [Skill(name="deploy", content="ours", files=[{"path": "a/b.txt", "content": "b"}])]
    written = write_skill_tree(
        tmp_path, ".claude/skills", skills, put=writes.put, taken=writes.taken
    )
    assert written == [tmp_path / ".claude/skills/deploy-multica/SKILL.md"]
    assert (tmp_path / ".claude/skills/deploy/SKILL.md").read_text() == "the user's skill"
    assert writes.put_brief("AGENTS.md", "the brief")
    assert (tmp_path / "AGENTS.md").read_text().startswith("# mine\n\n<!-- BEGIN")
    (tmp_path / ".multica" / "users-note").write_text("mine now")
    assert writes.rollback() == []
    after = _tree(tmp_path)
    assert after.pop(".multica") == "<dir>" and after.pop(".multica/users-note") == "mine now"
    assert after == before


def test_a_brief_file_that_is_a_link_is_left_alone(tmp_path: Path) -> None:
    """CLAUDE.md as a link to AGENTS.md: nothing written through it (the brief goes in the
    prompt instead)."""
    (tmp_path / "AGENTS.md").write_text("# mine")
    (tmp_path / "CLAUDE.md").symlink_to("AGENTS.md")
    writes = FolderWrites(tmp_path)
    assert not writes.put_brief("CLAUDE.md", "the brief")
    assert (tmp_path / "AGENTS.md").read_text() == "# mine"
    assert (tmp_path / "CLAUDE.md").is_symlink()


def test_a_marker_left_by_a_crashed_run_is_refreshed_and_a_foreign_one_refused(
    tmp_path: Path,
) -> None:
    """The daemon's own old marker is rewritten (and removed afterwards); anyone else's file
    there fails the task."""
    marker = tmp_path / ".multica" / "daemon_task_context.json"
    marker.parent.mkdir()
    marker.write_text(json.dumps({"managed_by": "multica-daemon-task", "agent_id": "old"}))
    writes = FolderWrites(tmp_path)
    writes.put_marker(".multica/daemon_task_context.json", '{"managed_by": "multica-daemon-task"}')
    assert "old" not in marker.read_text()
    writes.rollback()
    assert not marker.exists() and marker.parent.is_dir()  # the folder was not ours
    marker.write_text("a user's notes")
    with pytest.raises(LocalDirectoryError, match="not the daemon's task marker"):
        FolderWrites(tmp_path).put_marker(".multica/daemon_task_context.json", "{}")
    assert marker.read_text() == "a user's notes"


def test_a_link_planted_in_the_folder_is_never_followed(tmp_path: Path) -> None:
    """`.claude` made a link to another folder: no skill lands there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / ".claude").symlink_to(elsewhere)
    writes = FolderWrites(folder)
    assert writes.taken(".claude/skills/x")
    with pytest.raises(OSError):
        writes.put(".claude/skills/x/SKILL.md", "text")
    assert list(elsewhere.iterdir()) == []
