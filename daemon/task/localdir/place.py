"""A task's place when its project has a local directory: made before the agent starts,
settled after it stops.

In place, the agent's work dir is the user's folder itself; in worktree mode, a worktree of
its repository in the task's directory (worktree.py). Either way the task's own directory
still holds its config, temp dir and MCP file, and what the daemon writes where the agent
works (the task marker, skills, the brief) goes through `FolderWrites`, so that settling the
place takes all of it out again — before a worktree's leftovers are committed, so the
delivered branch holds the agent's work and nothing of the daemon's.

Nothing of the user's folder is ever collected: the task's directory of an in-place task is
marked `local_directory` for the GC, which then removes only build outputs from it; a
worktree is removed here, once its work is committed to its branch.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from daemon.boundary.beneath import Owner
from daemon.errors import LocalDirectoryError
from daemon.protocol.models import Task
from daemon.task.localdir.locks import DirectoryLocks
from daemon.task.localdir.resource import LocalDirectory
from daemon.task.localdir.sidecars import FolderWrites
from daemon.task.localdir.worktree import LocalWorktree, make_worktree
from daemon.task.setup.codex_home import CODEX
from daemon.task.setup.skills import skills_dir, write_skill_tree
from daemon.task.setup.workspace import TASK_MARKER, TaskDirs, prepare_dirs, task_marker, unguarded
from daemon.workdirs.git import Git

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a settled place tells the server: the branch holding the work, the folder that
    replaces the removed worktree, or why the worktree had to be kept."""

    branch: str = ""
    durable_work_dir: str = ""
    error: str = ""


@dataclass
class LocalPlace:
    """A task's local directory once its place is made."""

    local: LocalDirectory
    writes: FolderWrites
    worktree: LocalWorktree | None = None

    @property
    def in_place(self) -> bool:
        """Whether the agent works in the user's folder itself."""
        return self.worktree is None

    def settle(self) -> Delivery:
        """The daemon's files taken out; a worktree's work committed, the worktree removed.
        Blocking: in a worker thread, after the agent stopped and before the report."""
        problems = self.writes.rollback()
        if problems:
            log.warning("%s: left behind: %s", self.local.display_name, "; ".join(problems))
        tree = self.worktree
        if tree is None:
            return Delivery()
        if problems:
            # Committed, the daemon's own files would be the branch's content.
            tree.aborted = (
                "could not remove the runtime's own files from the worktree before committing: "
                + "; ".join(problems)
            )
        try:
            branch = tree.finalize()
        except LocalDirectoryError as exc:
            return Delivery(branch="" if tree.aborted else tree.branch, error=str(exc))
        # The user's folder stands for the work dir only once the worktree is surely gone.
        return Delivery(branch=branch, durable_work_dir=str(self.local.path))

    def discard(self) -> None:
        """Undo the place of a task whose agent never ran."""
        self.writes.rollback()
        if self.worktree is not None:
            self.worktree.discard()


def prepare_local(
    root: Path,
    task: Task,
    backend: str,
    local: LocalDirectory,
    git: Git,
    locks: DirectoryLocks,
    owner: Owner | None = None,
    hold: Callable[[Path], bool] = unguarded,
) -> TaskDirs:
    """The task's directories, its worktree in worktree mode, and the daemon's files where
    the agent works. Blocking: in a worker thread."""
    dirs = prepare_dirs(root, task, owner, hold, local=True)
    tree = None
    if local.worktree:
        agent = task.agent.name
        tree = make_worktree(git, locks.repo, local.real, dirs.work_dir, agent, task.id, owner)
        work = tree.work_dir
    else:
        work = local.path
    place = LocalPlace(local, FolderWrites(Path(os.path.realpath(work)), owner), tree)
    try:
        place.writes.put_marker(TASK_MARKER, task_marker(task))
        if backend != CODEX:  # Codex reads skills from its own home (spec.agent_spec)
            base = skills_dir(backend)
            writes = place.writes
            write_skill_tree(work, base, task.agent.skills, put=writes.put, taken=writes.taken)
    except BaseException:
        place.discard()
        raise
    return replace(dirs, work_dir=work, place=place, reused=_same_folder(task, local, tree))


def _same_folder(task: Task, local: LocalDirectory, tree: LocalWorktree | None) -> bool:
    """Whether the claim's session ran in this very folder (in place only: a worktree is new
    for every task), so it may be resumed."""
    if tree is not None or not task.prior_work_dir:
        return False
    try:
        return os.path.samefile(task.prior_work_dir, local.path)
    except OSError:
        return False
