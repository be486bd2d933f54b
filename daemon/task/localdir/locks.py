"""One task at a time in a local directory, first come first served, keyed by its real path.

Two long coding runs must not interleave their edits in one working tree, so a task in place
holds its folder from before its files are written until after its report. A chat turn only
reads and answers, the way its user's own editor would save a file, so it does not queue (Go
keeps it out of the lock for the same reason); a worktree task holds the folder only while
its snapshot is read.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import anyio


@dataclass
class _Folder:
    holder: str = ""
    waiting: deque[tuple[str, anyio.Event]] = field(default_factory=deque)


class DirectoryLocks:
    """The local directories running tasks hold, and who waits for each, in order (on the
    event loop); and one lock per repository for worktree bookkeeping (in threads)."""

    def __init__(self) -> None:
        self._folders: dict[Path, _Folder] = {}
        self._repos: dict[Path, threading.Lock] = {}
        self._repos_lock = threading.Lock()

    def repo(self, root: Path) -> threading.Lock:
        """The lock of one repository's worktree bookkeeping (`worktree add/remove/prune`
        race on its lock files): taken by worker threads, one per repository root."""
        with self._repos_lock:
            return self._repos.setdefault(root, threading.Lock())

    def holder(self, real: Path) -> str:
        """The task holding the folder now ("" when none does)."""
        folder = self._folders.get(real)
        return folder.holder if folder is not None else ""

    def waiting(self) -> int:
        """Tasks waiting for a folder now."""
        return sum(len(f.waiting) for f in self._folders.values())

    def try_take(self, real: Path, task_id: str) -> bool:
        """Take the folder at once if it is free and nobody waits for it."""
        folder = self._folders.setdefault(real, _Folder())
        if folder.holder or folder.waiting:
            return False
        folder.holder = task_id
        return True

    async def take(self, real: Path, task_id: str) -> None:
        """Take the folder, after the tasks that asked before (cancellable: then not taken)."""
        if self.try_take(real, task_id):
            return
        folder = self._folders[real]
        entry = (task_id, anyio.Event())
        folder.waiting.append(entry)
        try:
            await entry[1].wait()
        except BaseException:
            if entry in folder.waiting:
                folder.waiting.remove(entry)
            elif folder.holder == task_id:
                self.release(real, task_id)  # handed over as the wait was cancelled
            raise

    def release(self, real: Path, task_id: str) -> None:
        """Give the folder up; the next task waiting for it has it now."""
        folder = self._folders.get(real)
        if folder is None or folder.holder != task_id:
            return
        if folder.waiting:
            folder.holder, event = folder.waiting.popleft()
            event.set()
            return
        del self._folders[real]
