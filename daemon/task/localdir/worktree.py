"""Worktree mode: each task gets a git worktree of the folder's repository in its own task
directory, and delivers its work as a branch of that repository.

As Multica's daemon makes it:

- the agent sees what the user sees: the worktree starts at `HEAD`, the user's uncommitted
  tracked changes are replayed from `git stash create` (which touches neither their index nor
  their files) and their untracked files are copied (not the ignored ones, not the daemon's
  own `.agent_context`/`.multica`; at most 2000 files and 200 MiB, no untracked link) — a
  snapshot that would differ from their tree fails the task instead;
- the replayed state is committed as a baseline, so the branch's later commits are the agent's
  alone and a task that changed nothing is known;
- the branch is `agent/<agent>/<12 hex of the task>` (with `-<unix time>` when a re-run's
  branch already exists);
- afterwards, what the agent left uncommitted is committed, the worktree is removed and its
  removal confirmed, and the branch deleted when it holds nothing; whatever cannot be done
  keeps the worktree, and the task says where it is.

Every git command the user's repository sees (`worktree add/remove/prune`) runs under one lock
per repository root; with an agent user, git runs as that user.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from daemon.boundary.beneath import Owner, made_dirs_at, opened_real, remove_under
from daemon.errors import GitError, LocalDirectoryError
from daemon.task.localdir.resource import quoted
from daemon.task.localdir.untracked import MAX_UNTRACKED_BYTES, MAX_UNTRACKED_FILES, copy_untracked
from daemon.workdirs.git import Git
from daemon.workdirs.names import branch_name

log = logging.getLogger(__name__)

BASELINE = "chore(agent): baseline — uncommitted work from the local directory"
LEFT_OVER = "chore(agent): uncommitted changes from task"
_IDENTITY = ("-c", "user.name=Multica Agent", "-c", "user.email=agent@multica.local")

RepoLock = Callable[[Path], threading.Lock]
"""The lock of one repository root (DirectoryLocks.repo)."""


@dataclass
class LocalWorktree:
    """A task's worktree: the repository it belongs to, where it is, the agent's directory
    in it, its branch and the commit the agent's work starts from."""

    git: Git
    repo_lock: RepoLock
    root: Path
    path: Path
    work_dir: Path
    branch: str
    base: str
    aborted: str = ""
    """Why the branch must not be delivered (the daemon's files could not be taken out)."""

    def finalize(self) -> str:
        """Commit what the agent left, remove the worktree, keep the branch if it holds work;
        the branch ("" when none). LocalDirectoryError, the worktree kept, when any step
        cannot be done: the work must never be lost with it."""
        with self.repo_lock(self.root):
            if self.aborted:
                raise LocalDirectoryError(
                    f"refusing to deliver branch {self.branch}: {self.aborted}; the task"
                    f" worktree is preserved at {self.path} (listed by `git worktree list` in"
                    f" {self.root})"
                )
            try:
                dirty = bool(self._git(["status", "--porcelain"]))
            except GitError:
                dirty = True  # committing costs an empty commit at worst
            if dirty:
                try:
                    _commit(self.git, self.path, LEFT_OVER)
                except GitError as exc:
                    raise LocalDirectoryError(
                        f"could not commit the agent's changes to branch {self.branch}: {exc};"
                        f" the work is preserved in the worktree at {self.path} (listed by"
                        f" `git worktree list` in {self.root}) — recover it before that"
                        " directory is reclaimed"
                    ) from None
            try:
                produced = self._git(["rev-parse", "--verify", "HEAD"]) != self.base
            except GitError:
                produced = True
            if why := _remove(self.git, self.root, self.path):
                raise LocalDirectoryError(
                    f"could not remove finalized worktree for branch {self.branch}: {why}; the"
                    f" task worktree remains at {self.path}"
                )
            if produced:
                return self.branch
            _delete_branch(self.git, self.root, self.branch)
            return ""

    def discard(self) -> None:
        """Remove the worktree and its branch: the task ends before its agent ran."""
        with self.repo_lock(self.root):
            _remove(self.git, self.root, self.path)
            _delete_branch(self.git, self.root, self.branch)

    def _git(self, args: list[str]) -> str:
        return self.git.run(args, cwd=self.path)


def make_worktree(
    git: Git,
    repo_lock: RepoLock,
    folder: Path,
    path: Path,
    agent_name: str,
    task_id: str,
    owner: Owner | None = None,
) -> LocalWorktree:
    """The task's worktree at `path` (in its task directory) of the repository holding
    `folder` (a real path)."""
    try:
        root = Path(os.path.realpath(git.run(["rev-parse", "--show-toplevel"], cwd=folder)))
    except GitError:
        raise LocalDirectoryError(
            f"local_directory: {quoted(folder.name)} is not a git repository, but its project"
            " resource is set to execution_mode=worktree; initialise a repository there or switch"
            " the resource back to in_place"
        ) from None
    try:
        rel = folder.relative_to(root)
    except ValueError:
        raise LocalDirectoryError(
            f"local_directory: {quoted(folder)} is not inside its repository root {quoted(root)}"
        ) from None
    with repo_lock(root):
        if os.path.lexists(path):
            _remove(git, root, path)  # a stale registration of this task's earlier run
        try:
            git.run(["worktree", "prune"], cwd=root)
        except GitError as exc:
            log.warning("git worktree prune in %s failed: %s", root, exc)
        head = _head(git, root)
        try:
            stash = git.run([*_identity(git, root), "stash", "create"], cwd=root)
        except GitError as exc:
            raise LocalDirectoryError(
                f"could not capture the uncommitted changes in {quoted(root)}, so the worktree"
                f" would not match what you have on disk: {exc}"
            ) from None
        branch = _add(git, root, path, branch_name(agent_name, task_id), head)
        tree = LocalWorktree(git, repo_lock, root, path, path / rel, branch, head)
        try:
            tree.base = _replay(git, root, path, stash, owner)
        except BaseException:
            _remove(git, root, path)
            _delete_branch(git, root, branch)
            raise
    # The resource may point at a folder holding only ignored files: git did not make it.
    with opened_real(path) as top, made_dirs_at(top, rel.parts, [], owner=owner):
        pass
    log.info("worktree of %s ready: branch %s from %s", root, branch, head[:12])
    return tree


def _replay(git: Git, root: Path, path: Path, stash: str, owner: Owner | None) -> str:
    """The user's uncommitted state in the worktree, committed as its baseline; the commit
    the agent starts from."""
    if stash:
        try:
            git.run(["stash", "apply", stash], cwd=path)
        except GitError as exc:
            raise LocalDirectoryError(
                f"could not replay the uncommitted changes from {quoted(root)} into the task"
                f" worktree (the agent would have seen a different tree than you have): {exc}"
            ) from None
    copied, left = copy_untracked(git, root, path, owner)
    if left:
        raise LocalDirectoryError(
            f"could not replay every untracked file from {quoted(root)} into the task worktree"
            f" (copied {copied}, {left} left over; the replay covers regular files up to"
            f" {MAX_UNTRACKED_FILES} files / {MAX_UNTRACKED_BYTES >> 20} MiB and does not follow"
            " symlinks) — gitignore or clean up the untracked files, or switch the resource"
            " back to in_place"
        )
    try:
        if git.run(["status", "--porcelain"], cwd=path):
            _commit(git, path, BASELINE)
        return git.run(["rev-parse", "--verify", "HEAD"], cwd=path)
    except GitError as exc:
        raise LocalDirectoryError(
            f"could not record a baseline commit for the replayed state of {quoted(root)}: {exc}"
        ) from None


def _head(git: Git, root: Path) -> str:
    try:
        return git.run(["rev-parse", "--verify", "HEAD"], cwd=root)
    except GitError:
        raise LocalDirectoryError(
            f"repository {quoted(root)} has no commit to branch from (worktree mode needs at"
            " least one commit; make an initial commit or switch the resource back to"
            " in_place)"
        ) from None


def _add(git: Git, root: Path, path: Path, branch: str, base: str) -> str:
    try:
        git.run(["worktree", "add", "-b", branch, str(path), base], cwd=root)
        return branch
    except GitError as exc:
        if "already exists" not in str(exc).lower():
            raise LocalDirectoryError(f"git worktree add: {exc}") from None
    # A task run again keeps its id, so its first run's branch may still be there.
    again = f"{branch}-{int(time.time())}"
    try:
        git.run(["worktree", "add", "-b", again, str(path), base], cwd=root)
    except GitError as exc:
        raise LocalDirectoryError(f"git worktree add: {exc}") from None
    return again


def _commit(git: Git, path: Path, message: str) -> None:
    git.run(["add", "-A"], cwd=path)
    # The daemon's git runs no hook (its policy): a user's commit hooks are for their own
    # workflow, and a failing one must not cost the agent's work.
    git.run([*_identity(git, path), "commit", "--no-verify", "-m", message], cwd=path)


def _identity(git: Git, where: Path) -> tuple[str, ...]:
    """A committer only for a repository that names none: the user's own stays theirs."""
    try:
        return () if git.run(["config", "user.email"], cwd=where) else _IDENTITY
    except GitError:
        return _IDENTITY


def _remove(git: Git, root: Path, path: Path) -> str:
    """Unregister and delete the worktree; why it is still there ("" when it is gone)."""
    why = ""
    try:
        git.run(["worktree", "remove", "--force", str(path)], cwd=root)
    except GitError as exc:
        why = str(exc)
        try:
            remove_under(path.parent, path.name)
        except OSError as removal:
            why = f"{why}; {removal}"
        try:
            git.run(["worktree", "prune"], cwd=root)
        except GitError as prune:
            log.warning("git worktree prune in %s failed: %s", root, prune)
    if not os.path.lexists(path):
        return ""
    return why or "the worktree directory is still there after git removed it"


def _delete_branch(git: Git, root: Path, branch: str) -> None:
    try:
        git.run(["branch", "-D", branch], cwd=root)
    except GitError as exc:
        log.warning("deleting branch %s in %s failed: %s", branch, root, exc)
