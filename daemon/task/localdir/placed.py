"""What a task's local directory became once its place was made (`LocalPlace`), and what
settling it tells the server (`Delivery`). Apart from place.py, which makes it with the task's
directories (setup/workspace.py), so that the directories can name it without a circle."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from daemon.errors import LocalDirectoryError
from daemon.task.localdir.resource import LocalDirectory
from daemon.task.localdir.sidecars import FolderWrites
from daemon.task.localdir.worktree import LocalWorktree

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
