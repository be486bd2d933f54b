"""A task's checkout: a git worktree of the repository's cache at `<workdir>/<repo name>`.

A new checkout is `git worktree add` on the task's own branch. A work dir reused from an
earlier task of the same issue may already hold the checkout; Multica's daemon resets it
(`reset --hard`, `clean -fd`) and starts a new branch, losing whatever the last agent had not
committed. Here a checkout with uncommitted changes or untracked files is left exactly as it is,
on its branch, and the answer names that branch; only a clean one moves to the new task's
branch from the fresh base (the old branch and its commits stay in the repository).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import GitError
from daemon.workdirs.git import Git

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Checkout:
    """Where the repository was checked out, on which branch, and whether it was kept as is."""

    path: Path
    branch: str
    kept: bool = False


def check_out(git: Git, bare: Path, path: Path, branch: str, base: str) -> Checkout:
    """Create or update the checkout at `path` (the cache's lock held by the caller)."""
    if path.is_symlink():
        raise GitError(f"checkout path {path} is a symbolic link")
    if (path / ".git").is_file() and not (path / ".git").is_symlink():
        return _reuse(git, bare, path, branch, base)
    if path.exists():
        raise GitError(f"checkout path {path} already exists and is not a worktree")
    # A worktree whose directory was deleted stays registered and would block its path.
    git.ok(["worktree", "prune"], cwd=bare)
    add = ["worktree", "add", "--quiet", "-b"]
    made = _with_fresh_name(
        branch, lambda name: git.run([*add, name, "--", str(path), base], cwd=bare)
    )
    return Checkout(path, made)


def _reuse(git: Git, bare: Path, path: Path, branch: str, base: str) -> Checkout:
    common = Path(git.run(["rev-parse", "--git-common-dir"], cwd=path))
    if not common.is_absolute():
        common = path / common
    if common.resolve() != bare.resolve():
        raise GitError(f"checkout path {path} is a worktree of another repository")
    current = _current_branch(git, path)
    changes = git.run(["status", "--porcelain", "--untracked-files=normal"], cwd=path)
    if changes:
        log.info(
            "repo checkout: %s keeps %d uncommitted change(s) on %s",
            path,
            len(changes.splitlines()),
            current or "a detached HEAD",
        )
        return Checkout(path, current or "HEAD", kept=True)
    if current == branch:
        return Checkout(path, branch, kept=True)  # this task asked again
    made = _with_fresh_name(
        branch, lambda name: git.run(["checkout", "--quiet", "-b", name, base, "--"], cwd=path)
    )
    return Checkout(path, made)


def _current_branch(git: Git, path: Path) -> str:
    try:
        return git.run(["symbolic-ref", "--quiet", "--short", "HEAD"], cwd=path)
    except GitError:
        return ""


def _with_fresh_name(branch: str, make: Callable[[str], object]) -> str:
    """Run `make(branch)`; when that branch exists already, once more with a time suffix."""
    try:
        make(branch)
    except GitError as exc:
        if "a branch named" not in str(exc).lower():
            raise
        branch = f"{branch}-{int(time.time())}"
        make(branch)
    return branch
