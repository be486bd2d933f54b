"""A task's checkout: a git worktree of the repository's cache at `<workdir>/<repo name>`.

A new checkout is `git worktree add` on the task's own branch. A work dir reused from an
earlier task of the same issue may already hold the checkout; Multica's daemon resets it
(`reset --hard`, `clean -fd`) and starts a new branch, losing whatever the last agent had not
committed. Here a checkout with uncommitted changes or untracked files is left exactly as it is,
on its branch, and the answer names that branch; only a clean one moves to the new task's
branch from the fresh base (the old branch and its commits stay in the repository).

An isolated checkout (Multica's `checkout_mode: isolated`) is a local clone with its git
directory inside the work dir and the real URL as `origin`; it is reused the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from backends.process.identity import AgentUser
from daemon.boundary.beneath import remove_as, remove_under
from daemon.errors import GitError
from daemon.workdirs.git import Git

log = logging.getLogger(__name__)

ISOLATED = "isolated"
ISOLATED_KEY = "multica.checkout-mode"
"""Marks an isolated checkout, under Multica's own config key and value."""
_CACHE_REMOTE = "multica-cache"


@dataclass(frozen=True, slots=True)
class Checkout:
    """Where the repository was checked out, on which branch, and whether it was kept as is."""

    path: Path
    branch: str
    kept: bool = False


def check_out(
    daemon_git: Git,
    bare: Path,
    url: str,
    path: Path,
    branch: str,
    base: str,
    *,
    isolated: bool = False,
    user: AgentUser | None = None,
) -> Checkout:
    """Create or update the checkout at `path` (the cache's lock held by the caller).

    `isolated` (Multica's `checkout_mode: isolated`, for sandboxes that keep a linked worktree's
    git directory read-only) makes a local clone with its own `.git` instead of a worktree. A
    checkout already at `path` keeps its kind, whatever the request asks. With an agent `user`
    every checkout is isolated and made by that user's git, so it is the agent's own and the
    daemon's git never runs in a repository the agent controls.
    """
    git = daemon_git.acting_as(user, bare)
    isolated = isolated or user is not None
    if path.is_symlink():
        raise GitError(f"checkout path {path} is a symbolic link")
    dot_git = path / ".git"
    if dot_git.is_file() and not dot_git.is_symlink():
        _same_cache(git, bare, path)
        return _reuse(git, path, branch, base)
    if dot_git.is_dir() and not dot_git.is_symlink():
        _sync_isolated(git, bare, url, path)
        return _reuse(git, path, branch, base)
    if path.exists():
        raise GitError(f"checkout path {path} already exists and is not a worktree")
    if isolated:
        return _clone_isolated(git, bare, url, path, branch, base, user)
    # A worktree whose directory was deleted stays registered and would block its path.
    daemon_git.ok(["worktree", "prune"], cwd=bare)
    add = ["worktree", "add", "--quiet", "-b"]
    made = _with_fresh_name(
        branch, lambda name: daemon_git.run([*add, name, "--", str(path), base], cwd=bare)
    )
    return Checkout(path, made)


def _same_cache(git: Git, bare: Path, path: Path) -> None:
    common = Path(git.run(["rev-parse", "--git-common-dir"], cwd=path))
    if not common.is_absolute():
        common = path / common
    if common.resolve() != bare.resolve():
        raise GitError(f"checkout path {path} is a worktree of another repository")


def _clone_isolated(
    git: Git, bare: Path, url: str, path: Path, branch: str, base: str, user: AgentUser | None
) -> Checkout:
    """A local clone of the cache (objects hard-linked) whose `origin` is the real URL."""
    # No hard links: the clone's objects are its owner's own, never the cache's files.
    clone = ["clone", "--quiet", "--local", "--no-hardlinks", "--no-checkout", "--no-tags"]
    # From the work dir: an agent user's git cannot even start in a cwd it may not enter.
    source = ["--origin", _CACHE_REMOTE, *git.upload_pack, "--", str(bare), str(path)]
    git.run([*clone, *source], cwd=path.parent)
    try:
        git.run(["remote", "remove", _CACHE_REMOTE], cwd=path)
        git.run(["remote", "add", "origin", "--", url], cwd=path)
        git.run(["config", ISOLATED_KEY, ISOLATED], cwd=path)
        _fetch_cache_refs(git, bare, path)
        git.run(["checkout", "--quiet", "--detach", base, "--"], cwd=path)
        # The clone copied the cache's own heads (other tasks' branches): none are this one's.
        for ref in git.run(
            ["for-each-ref", "--format=%(refname)", "refs/heads/"], cwd=path
        ).split():
            git.run(["update-ref", "-d", ref], cwd=path)
        made = _with_fresh_name(
            branch, lambda name: git.run(["checkout", "--quiet", "-b", name, base, "--"], cwd=path)
        )
    except GitError:
        _discard(path, user)  # made by this call alone, nothing to keep
        raise
    return Checkout(path, made)


def _discard(path: Path, user: AgentUser | None) -> None:
    """Remove a clone this call made and could not finish.

    With an agent user the clone is that user's, made by its own git in its own work dir, so
    removing it is the agent's act and runs as the agent: its git may have been paused while
    the work dir became a link to a root-owned folder, and as the agent the removal can take
    nothing the agent could not take itself (root's would, through the link). Without one,
    the agent is the daemon's own user and there is no boundary to keep; the removal still
    goes through handles from the work dir, never through a link in it.
    """
    if user is not None:
        if not remove_as(user, path):
            log.warning("repo checkout: could not remove the failed clone at %s", path)
        return
    with suppress(OSError):
        remove_under(path.parent, path.name)


def _sync_isolated(git: Git, bare: Path, url: str, path: Path) -> None:
    """An isolated checkout of this repository gets the cache's newest refs."""
    try:
        mode = git.run(["config", "--get", ISOLATED_KEY], cwd=path)
        origin = git.run(["remote", "get-url", "origin"], cwd=path)
    except GitError:
        mode = origin = ""
    if mode != ISOLATED or origin != url:
        raise GitError(f"checkout path {path} is a clone of another repository")
    _fetch_cache_refs(git, bare, path)


def _fetch_cache_refs(git: Git, bare: Path, path: Path) -> None:
    refspecs = ["+refs/remotes/origin/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
    fetch = ["fetch", "--quiet", "--force", "--no-tags", *git.upload_pack]
    git.run([*fetch, "--", str(bare), *refspecs], cwd=path)


def _reuse(git: Git, path: Path, branch: str, base: str) -> Checkout:
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
    if current == branch and git.ok(["merge-base", "--is-ancestor", base, "HEAD"], cwd=path):
        return Checkout(path, branch, kept=True)  # this task asked again for what it has
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
