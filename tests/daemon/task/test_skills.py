"""Tests for writing an agent's inline skills where its CLI discovers them."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.protocol.models import Skill
from daemon.task.setup.skills import FILE_LIMIT, TASK_LIMIT, skill_slug, write_skills


def _skill(name: str, content: str = "Body.", **fields: object) -> Skill:
    return Skill.model_validate({"name": name, "content": content, **fields})


def test_claude_skills_go_to_the_projects_skills_directory(tmp_path: Path) -> None:
    """`.claude/skills/<slug>/SKILL.md` with a front matter naming it; others: `.agent_context`."""
    (path,) = write_skills(tmp_path, "claude", [_skill("Deploy Check", description='say "hi"')])
    assert path == tmp_path / ".claude" / "skills" / "deploy-check" / "SKILL.md"
    assert path.read_text() == (
        '---\nname: deploy-check\ndescription: "say \\"hi\\""\n---\n\nBody.'
    )
    (other,) = write_skills(tmp_path, "codex", [_skill("x", "---\nname: x\n---\nKept.")])
    assert other == tmp_path / ".agent_context" / "skills" / "x" / "SKILL.md"
    assert other.read_text() == "---\nname: x\n---\nKept."


@pytest.mark.parametrize(
    ("backend", "folder"),
    [
        ("copilot", ".github/skills"),
        ("kiro", ".kiro/skills"),
        ("qwenpaw", "skill_pool"),
        ("cursor", ".cursor/skills"),
        ("codebuddy", ".codebuddy/skills"),
        ("openclaw", "skills"),
        ("antigravity", ".agents/skills"),
        ("deveco", ".deveco/skills"),
        ("dsh", ".dsh/skills"),
        ("omp", ".omp/skills"),
    ],
)
def test_each_cli_gets_its_skills_where_it_looks(tmp_path: Path, backend: str, folder: str) -> None:
    """Copilot CLI and the ACP agents find project skills in folders of their own."""
    (path,) = write_skills(tmp_path, backend, [_skill("lint")])
    assert path == tmp_path / folder / "lint" / "SKILL.md"


def test_names_that_sanitise_alike_get_their_own_directories(tmp_path: Path) -> None:
    """`A B`, `a-b` and an unnamed skill: three directories."""
    paths = write_skills(tmp_path, "claude", [_skill("A B"), _skill("a-b"), _skill("../..")])
    assert [p.parent.name for p in paths] == ["a-b", "a-b-2", "skill"]
    assert skill_slug("") == "skill"


def test_supporting_files_stay_inside_their_skill(tmp_path: Path) -> None:
    """Nested files are written; escaping, absolute and SKILL.md copies are skipped."""
    files = [
        {"path": "ref/notes.md", "content": "n"},
        {"path": "../../evil.md", "content": "e"},
        {"path": "/etc/evil.md", "content": "e"},
        {"path": "./SKILL.md", "content": "shadow"},
    ]
    work = tmp_path / "w"
    work.mkdir()
    (path,) = write_skills(work, "claude", [_skill("s", files=files)])
    assert (path.parent / "ref" / "notes.md").read_text() == "n"
    assert "shadow" not in path.read_text()
    assert not list(tmp_path.rglob("evil.md"))


def test_a_symlinked_skills_directory_is_not_followed(tmp_path: Path) -> None:
    """An agent's `.claude` link to elsewhere stops the write instead of landing there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "w"
    work.mkdir()
    (work / ".claude").symlink_to(outside)
    with pytest.raises(OSError):
        write_skills(work, "claude", [_skill("s")])
    assert list(outside.iterdir()) == []


def test_skill_files_past_their_caps_are_not_written(tmp_path: Path) -> None:
    """A skill file over the per-file cap is skipped (a `SKILL.md` skips its skill), and the
    files past the per-task total are skipped; the rest are written."""
    big = "x" * (FILE_LIMIT + 1)
    fits = "y" * (FILE_LIMIT - 100)
    skills = [
        _skill("huge", big),
        _skill(
            "tools",
            "ok",
            files=[{"path": "a.txt", "content": big}, {"path": "b.txt", "content": "b"}],
        ),
        *(_skill(f"s{n}", fits) for n in range(TASK_LIMIT // FILE_LIMIT + 2)),
    ]
    written = write_skills(tmp_path, "claude", skills)
    base = tmp_path / ".claude" / "skills"
    assert not (base / "huge").exists()
    assert (base / "tools" / "b.txt").read_text() == "b" and not (base / "tools" / "a.txt").exists()
    assert sum(p.stat().st_size for p in base.rglob("*") if p.is_file()) <= TASK_LIMIT
    assert len(written) == 1 + TASK_LIMIT // FILE_LIMIT
