"""Sizes on disk and build outputs, measured as the GC removes them: never through a link.

A task directory may hold links an agent left (to `/`, to the user's home) and the per-task
Codex home links the user's login into itself; a walk that followed them would measure, or
remove, what is not the task's. Only regular files count; `.git` counts toward a directory's
size but is never searched for build outputs, so an agent's history is never one.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from daemon.boundary.beneath import entries_at, opened_dir, remove_at, size_at, walk_at

log = logging.getLogger(__name__)

GIT_DIR = ".git"

Found = Callable[[int, str], None]
"""Told of each build-output directory: its parent's open handle and its name."""


def dir_size(path: Path) -> int:
    """Bytes of the regular files under `path`, links neither followed nor counted; 0 when it
    cannot be opened. `path`'s parent is the anchor (a workspace folder, the caches' root)."""
    try:
        with opened_dir(path.parent, path.name) as fd:
            return size_at(fd)
    except OSError:
        return 0


def subdirs(directory: Path) -> list[Path]:
    """The real subdirectories of `directory` (never a link to one), sorted; none if unreadable.
    `directory` is the daemon's own (the root, a workspace folder): listing it is safe."""
    try:
        # The workspaces root itself may be a link the operator made.
        with opened_dir(directory, follow=True) as fd:
            found = [name for name, info in entries_at(fd) if stat.S_ISDIR(info.st_mode)]
    except OSError:
        return []
    return [directory / name for name in found]


def artifact_names(patterns: Iterable[str]) -> frozenset[str]:
    """The directory names that are build outputs (a pattern with a separator is no name)."""
    return frozenset(p.strip() for p in patterns if p.strip() and not {"/", "\\"} & set(p))


def task_size(task_dir: Path, names: frozenset[str]) -> tuple[int, int]:
    """(all bytes, build-output bytes) of one task directory."""
    artifacts = 0

    def found(parent: int, name: str) -> None:
        nonlocal artifacts
        artifacts += size_at(parent, name)

    plain = _walk(task_dir, names, found, count_git=True)
    return plain + artifacts, artifacts


def remove_artifacts(
    task_dir: Path,
    names: frozenset[str],
    on_found: Callable[[str], None] = lambda name: None,
) -> tuple[int, int, dict[str, int]]:
    """Remove every build-output directory under `task_dir`: (removed, bytes, count by name).

    `on_found(name)` is told of each one before it is removed (a seam: a test swaps its
    parent for a link there, as an agent watching with inotify would). The removal works from
    the parent's handle the walk holds, so such a swap redirects nothing.
    """
    removed, freed, by_name = 0, 0, dict[str, int]()

    def found(parent: int, name: str) -> None:
        nonlocal removed, freed
        on_found(name)
        size = size_at(parent, name)
        try:
            remove_at(parent, name)
        except OSError as exc:
            log.warning("gc: cannot remove %s in %s: %s", name, task_dir, exc)
            return
        removed, freed = removed + 1, freed + size
        by_name[name] = by_name.get(name, 0) + 1

    _walk(task_dir, names, found, count_git=False)
    return removed, freed, by_name


def _walk(root: Path, names: frozenset[str], found: Found, *, count_git: bool) -> int:
    """Visit `root` without following links: `found` gets each build-output directory (not
    entered), `.git` is counted (with `count_git`) but never searched; returns the bytes of
    the other regular files."""
    plain = 0

    def enter(parent: int, name: str, info: os.stat_result) -> bool:
        nonlocal plain
        if name == GIT_DIR:
            plain += size_at(parent, name) if count_git else 0
        elif name in names:
            found(parent, name)
        else:
            return True
        return False

    def visit(parent: int, name: str, info: os.stat_result) -> None:
        nonlocal plain
        if stat.S_ISREG(info.st_mode):
            plain += info.st_size

    try:
        with opened_dir(root.parent, root.name) as fd:
            walk_at(fd, enter, visit)
    except OSError:
        return plain
    return plain


def format_bytes(size: int) -> str:
    """`300 B`, `12.0 KiB`, `1.5 GiB`."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
