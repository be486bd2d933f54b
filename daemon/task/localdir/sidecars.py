"""What the daemon writes into a folder that is not its own, and the exact undoing of it.

A task in a user's folder (or in the worktree whose branch is its deliverable) gets the same
files as any other: the daemon's task marker, the agent's skills, the brief. Each is written
only where nothing stood (a user's own skill of the same name keeps its directory, and the
task's takes Go's next name), and each file and folder made is recorded, so that afterwards
they are removed in reverse, a folder only while it is still empty (what the user put in it
meanwhile stays), and the brief's block is taken out of the user's own file (brief_block.py).
Every step goes through directory handles walked down from `/` along the folder's real path
(daemon/boundary/beneath.py): a link planted in the folder is never followed.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path

from daemon.boundary.beneath import (
    Owner,
    create_at,
    made_dirs_at,
    opened_dir_at,
    opened_real,
    read_at,
    relative_parts,
    rewrite_at,
    rmdir_at,
    stat_at,
    unlink_at,
)
from daemon.errors import LocalDirectoryError
from daemon.task.localdir import brief_block
from daemon.task.localdir.resource import quoted

log = logging.getLogger(__name__)

BRIEF_LIMIT = 1 << 20
"""Bytes of a user's brief file the block is put into; a larger one gets the brief in the
prompt instead."""
MARKER_LIMIT = 64 * 1024
_MANAGED_TASK = "multica-daemon-task"


class FolderWrites:
    """The daemon's files in one folder for one task, each recorded to be taken out again."""

    def __init__(self, folder: Path, owner: Owner | None = None) -> None:
        """`folder` is a real path (no link in it); `owner` gets every file and folder made."""
        self.folder = folder
        self.owner = owner
        self.files: list[tuple[str, ...]] = []
        self.dirs: list[tuple[str, ...]] = []
        self.brief = ""
        """The brief file holding the daemon's block ("" when none does)."""

    def taken(self, path: str) -> bool:
        """Whether anything (a file, a folder, a link) holds `path` in the folder."""
        *dirs, name = relative_parts(path)
        try:
            with opened_real(self.folder) as top, opened_dir_at(top, dirs) as fd:
                return stat_at(fd, name) is not None
        except FileNotFoundError:
            return False
        except OSError:
            return True  # a link or a file on the way: not a place to write

    def put(self, path: str, text: str) -> Path:
        """Make `path` with `text`; FileExistsError when something already holds it."""
        *dirs, name = relative_parts(path)
        with (
            opened_real(self.folder) as top,
            made_dirs_at(top, dirs, self.dirs, owner=self.owner) as fd,
        ):
            create_at(fd, name, text.encode(), 0o644, self.owner)
        self.files.append((*dirs, name))
        return self.folder.joinpath(*dirs, name)

    def put_marker(self, path: str, text: str) -> None:
        """The daemon's task marker: made, or refreshed when a crashed run left one of ours;
        a file of anyone else's there fails the task (the CLI would read it as ours)."""
        try:
            self.put(path, text)
            return
        except FileExistsError:
            pass
        *dirs, name = relative_parts(path)
        try:
            with opened_real(self.folder) as top, opened_dir_at(top, dirs) as fd:
                found = json.loads(read_at(fd, name, MARKER_LIMIT))
                if not isinstance(found, dict) or found.get("managed_by") != _MANAGED_TASK:
                    raise ValueError("not the daemon's")
                rewrite_at(fd, name, text.encode())
        except (OSError, ValueError):
            raise LocalDirectoryError(
                f"local_directory: {path} in {quoted(self.folder.name)} is not the daemon's task"
                " marker; move it away so the task can mark its folder"
            ) from None
        self.files.append((*dirs, name))

    def put_brief(self, name: str, brief: str) -> bool:
        """The brief as a block in the folder's `name` (made when missing); False when that
        file is a link, not a regular file or too large (the brief then goes in the prompt)."""
        try:
            with opened_real(self.folder) as fd:
                try:
                    existing: str | None = read_at(fd, name, BRIEF_LIMIT).decode()
                except FileNotFoundError:
                    existing = None
                content = brief_block.injected(existing, brief).encode()
                if existing is None:
                    create_at(fd, name, content, 0o644, self.owner)
                else:
                    rewrite_at(fd, name, content)
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("%s in %s left alone (%s): the brief goes in the prompt", name, self, exc)
            return False
        self.brief = name
        return True

    def rollback(self) -> list[str]:
        """Take out everything recorded, the newest first; what could not be, as sentences."""
        problems: list[str] = []
        try:
            with opened_real(self.folder) as top:
                if self.brief:
                    self._unbrief(top, problems)
                for parts in reversed(self.files):
                    try:
                        unlink_at(top, parts)
                    except OSError as exc:
                        problems.append(f"{'/'.join(parts)}: {exc.strerror or exc}")
                for parts in reversed(self.dirs):
                    try:
                        rmdir_at(top, parts)  # one the user filled stays, on purpose
                    except OSError as exc:
                        problems.append(f"{'/'.join(parts)}/: {exc.strerror or exc}")
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                problems.append(f"{self.folder}: {exc.strerror or exc}")
        self.files, self.dirs, self.brief = [], [], ""
        return problems

    def _unbrief(self, top: int, problems: list[str]) -> None:
        name = self.brief
        try:
            content = read_at(top, name, 2 * BRIEF_LIMIT)  # the user's part and the block
            text = content.decode()
            left = brief_block.excised(text)
            if left is None:
                os.unlink(name, dir_fd=top)
            elif left != text:
                rewrite_at(top, name, left.encode())
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{name}: {exc}")

    def __str__(self) -> str:
        return self.folder.name
