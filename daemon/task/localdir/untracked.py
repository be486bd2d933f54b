"""The user's untracked files replayed into a task's worktree, as Multica's daemon copies them.

`git worktree add` makes only what is committed, so a file the user just made would be missing
for the agent. The untracked files that are not ignored (`ls-files --others
--exclude-standard -z`, names kept byte for byte) are copied, executable bits kept, streamed
through directory handles (no link followed on either side); at most 2000 files and 200 MiB.
What cannot be copied — past the bounds, an untracked link (copying the link or its target
would each be a guess), a file gone meanwhile — is counted, and the caller fails the task
rather than hand the agent a tree the user would not recognise. A FIFO or a socket is not
content and is skipped. The daemon's own `.agent_context` and `.multica` (an in-place task's
on the same folder) are never copied.
"""

from __future__ import annotations

import logging
import stat
from pathlib import Path

from daemon.boundary.beneath import (
    Owner,
    copy_at,
    made_dirs_at,
    opened_dir_at,
    opened_real,
    stat_at,
)
from daemon.workdirs.git import Git

log = logging.getLogger(__name__)

MAX_UNTRACKED_FILES = 2000
MAX_UNTRACKED_BYTES = 200 << 20
SIDECAR_DIRS = frozenset({".agent_context", ".multica"})


def copy_untracked(git: Git, root: Path, path: Path, owner: Owner | None) -> tuple[int, int]:
    """Copy the untracked, not ignored files; (copied, left over)."""
    listed = git.run(["ls-files", "--others", "--exclude-standard", "-z"], cwd=root, strip=False)
    copied = left = 0
    budget = MAX_UNTRACKED_BYTES
    with opened_real(root) as source, opened_real(path) as target:
        for name in listed.split("\0"):
            parts = tuple(name.split("/")) if name else ()
            if not parts or SIDECAR_DIRS.intersection(parts):
                continue  # an in-place task's brief on the same folder is not the user's
            if copied >= MAX_UNTRACKED_FILES or budget <= 0:
                left += 1
                continue
            try:
                size = _copy_one(source, target, parts, budget, owner)
            except OSError as exc:
                log.warning("untracked %r not replayed: %s", name, exc)
                left += 1
                continue
            if size is None:
                continue  # a FIFO, a socket: not content
            budget -= size
            copied += 1
    return copied, left


def _copy_one(
    source: int, target: int, parts: tuple[str, ...], budget: int, owner: Owner | None
) -> int | None:
    *dirs, name = parts
    with opened_dir_at(source, dirs) as fd:
        info = stat_at(fd, name)
        if info is None:
            raise FileNotFoundError(name)
        if stat.S_ISLNK(info.st_mode):
            raise OSError("an untracked symbolic link is not replayed")
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > budget:
            raise OSError("past the untracked bytes budget")
        with made_dirs_at(target, dirs, [], owner=owner) as into:
            # The executable bit stays: a script the user just wrote must still run.
            return copy_at(fd, name, into, budget, stat.S_IMODE(info.st_mode) & 0o777, owner)
