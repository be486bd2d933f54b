"""The co-author hook: which settings want it, where it goes, what it never touches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daemon.workdirs.coauthor import HOOK, MARKER, co_authored, place_hook


@pytest.mark.parametrize(
    ("settings", "wanted"),
    [
        (None, True),
        ({}, True),
        ({"co_authored_by_enabled": True}, True),
        ({"co_authored_by_enabled": False}, False),
        ({"github_enabled": False}, False),
        ({"github_enabled": False, "co_authored_by_enabled": True}, False),
        ({"github_enabled": True, "co_authored_by_enabled": False}, False),
        ({"co_authored_by_enabled": "no"}, True),  # unreadable: the default
    ],
)
def test_the_workspaces_settings_decide(settings: dict[str, Any] | None, wanted: bool) -> None:
    """On unless the GitHub switch or the co-author switch is off; unreadable means on."""
    assert co_authored(settings) is wanted


def _clone(task_dir: Path) -> Path:
    """An isolated checkout's layout: its own `.git` directory."""
    clone = task_dir / "workdir" / "app"
    (clone / ".git" / "hooks").mkdir(parents=True)
    return clone


def test_a_hooks_folder_swapped_for_a_link_is_not_written_through(tmp_path: Path) -> None:
    """The agent made its clone's hooks a link out of its tree: nothing lands there."""
    task_dir = tmp_path / "task"
    clone = _clone(task_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    (clone / ".git" / "hooks").rmdir()
    (clone / ".git" / "hooks").symlink_to(outside)
    place_hook(task_dir, clone, tmp_path / "no-cache", True, None)
    assert list(outside.iterdir()) == []


def test_only_a_hook_with_multicas_marker_is_removed(tmp_path: Path) -> None:
    """Turned off: Multica's hook goes, a hook of anyone else's stays."""
    task_dir = tmp_path / "task"
    ours, theirs = _clone(task_dir), task_dir / "workdir" / "lib"
    (theirs / ".git" / "hooks").mkdir(parents=True)
    place_hook(task_dir, ours, tmp_path / "no-cache", True, None)
    hook = ours / ".git" / "hooks" / "prepare-commit-msg"
    assert hook.read_text() == HOOK and MARKER in HOOK and hook.stat().st_mode & 0o111
    (theirs / ".git" / "hooks" / "prepare-commit-msg").write_text("#!/bin/sh\nexit 0\n")
    for clone in (ours, theirs):
        place_hook(task_dir, clone, tmp_path / "no-cache", False, None)
    assert not hook.exists()
    assert (theirs / ".git" / "hooks" / "prepare-commit-msg").read_text() == "#!/bin/sh\nexit 0\n"
