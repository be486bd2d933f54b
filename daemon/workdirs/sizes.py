"""Sizes on disk and build outputs, measured as the GC removes them: never through a link.

A task directory may hold links an agent left (to `/`, to the user's home) and the per-task
Codex home links the user's login into itself; a walk that followed them would measure, or
remove, what is not the task's. Only regular files count; `.git` counts toward a directory's
size but is never searched for build outputs, so an agent's history is never one.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

GIT_DIR = ".git"


def dir_size(root: Path) -> int:
    """Bytes of the regular files under `root`, links neither followed nor counted."""
    total = 0
    stack = [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(Path(entry.path))
                    elif stat.S_ISREG(info.st_mode):
                        total += info.st_size
        except OSError:
            continue
    return total


def subdirs(directory: Path) -> list[Path]:
    """The real subdirectories of `directory` (never a link to one), sorted; none if unreadable."""
    try:
        with os.scandir(directory) as entries:
            found = [e for e in entries if stat.S_ISDIR(e.stat(follow_symlinks=False).st_mode)]
    except OSError:
        return []
    return sorted(Path(e.path) for e in found)


def artifact_names(patterns: Iterable[str]) -> frozenset[str]:
    """The directory names that are build outputs (a pattern with a separator is no name)."""
    return frozenset(p.strip() for p in patterns if p.strip() and not {"/", "\\"} & set(p))


def task_size(task_dir: Path, names: frozenset[str]) -> tuple[int, int]:
    """(all bytes, build-output bytes) of one task directory."""
    total = artifacts = 0

    def found(path: Path) -> None:
        nonlocal total, artifacts
        size = dir_size(path)
        total += size
        artifacts += size

    plain = _walk(task_dir, names, found, on_git=dir_size)
    return total + plain, artifacts


def remove_artifacts(task_dir: Path, names: frozenset[str]) -> tuple[int, int, dict[str, int]]:
    """Remove every build-output directory under `task_dir`: (removed, bytes, count by name)."""
    removed, freed, by_name = 0, 0, dict[str, int]()

    def found(path: Path) -> None:
        nonlocal removed, freed
        size = dir_size(path)
        try:
            shutil.rmtree(path)
        except OSError as exc:
            log.warning("gc: cannot remove %s: %s", path, exc)
            return
        removed, freed = removed + 1, freed + size
        by_name[path.name] = by_name.get(path.name, 0) + 1

    _walk(task_dir, names, found, on_git=lambda p: 0)
    return removed, freed, by_name


def _walk(
    root: Path,
    names: frozenset[str],
    found: Callable[[Path], None],
    *,
    on_git: Callable[[Path], int],
) -> int:
    """Visit `root` without following links: `found` gets each build-output directory (not
    entered), `on_git` each `.git`; returns the bytes of the other regular files."""
    plain = 0
    stack = [root]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            path = Path(entry.path)
            if stat.S_ISDIR(info.st_mode):
                if entry.name == GIT_DIR:
                    plain += on_git(path)
                elif entry.name in names:
                    found(path)
                else:
                    stack.append(path)
            elif stat.S_ISREG(info.st_mode):
                plain += info.st_size
    return plain


def format_bytes(size: int) -> str:
    """`300 B`, `12.0 KiB`, `1.5 GiB`."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
