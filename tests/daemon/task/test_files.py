"""Tests for writing files where an agent can reach: never through a link, never outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daemon.boundary.beneath import UnsafePathError, read_under, relative_parts, write_under


def test_a_file_is_written_with_its_mode_and_its_directories(tmp_path: Path) -> None:
    """Missing directories are created; the file gets the mode asked for, whatever the umask."""
    path = write_under(tmp_path, "a/b/secret.json", "{}", mode=0o600)
    assert path == tmp_path / "a" / "b" / "secret.json"
    assert (path.read_text(), path.stat().st_mode & 0o777) == ("{}", 0o600)
    assert [p.name for p in path.parent.iterdir()] == ["secret.json"]  # no temp file left


def test_a_symlinked_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    """The link itself is replaced by the new file; its target keeps its bytes."""
    target = tmp_path / "target"
    target.write_text("keep")
    root = tmp_path / "root"
    root.mkdir()
    (root / "AGENTS.md").symlink_to(target)
    write_under(root, "AGENTS.md", "brief")
    assert (target.read_text(), (root / "AGENTS.md").read_text()) == ("keep", "brief")
    assert not (root / "AGENTS.md").is_symlink()


def test_a_symlinked_directory_on_the_way_is_refused(tmp_path: Path) -> None:
    """`.claude` pointing elsewhere stops the write: nothing lands outside the root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / ".claude").symlink_to(outside)
    with pytest.raises(OSError):
        write_under(root, ".claude/skills/x/SKILL.md", "x")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "", ".", "a\0b"])
def test_paths_that_leave_the_root_are_refused(tmp_path: Path, path: str) -> None:
    """Absolute, empty and climbing paths are refused before anything is written."""
    with pytest.raises(UnsafePathError):
        write_under(tmp_path, path, "x")


def test_relative_parts_drop_dots_and_read_backslashes_as_separators() -> None:
    """`./a//b` and `a\\b` are both two components."""
    assert relative_parts("./a//b") == ("a", "b") == relative_parts("a\\b")


def test_reading_follows_no_link(tmp_path: Path) -> None:
    """A marker reached through a symlink reads as absent."""
    (tmp_path / "real.json").write_text("{}")
    os.symlink(tmp_path / "real.json", tmp_path / "link.json")
    assert read_under(tmp_path, "real.json") == "{}"
    assert read_under(tmp_path, "link.json") is None
    assert read_under(tmp_path, "missing.json") is None
