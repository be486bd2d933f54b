"""The Codex CLI's sessions folder as the daemon reads it: whether a thread's rollout exists
(so a session can be pinned) and its usage so far (a resumed run's baseline).

The folder is the agent's: in a task's Codex home (`codex-home/sessions`), normally the daemon's
link to its user's own sessions. With an agent user root reads it only through handles that
follow no link, the daemon's own link resolved from the daemon's side, and enters no folder and
reads no file the agent could not itself (daemon/boundary/beneath.py).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic_core import from_json

from backends.codex.events import thread_totals
from daemon.boundary.beneath import (
    Owner,
    may_enter,
    opened_at,
    opened_dir,
    read_at,
    stat_at,
    walk_at,
)

_ROLLOUT_TAIL_BYTES = 1024 * 1024


def rollout_present(
    home: Path, thread: str, reader: Owner | None = None, linked: Path | None = None
) -> bool:
    """Whether the thread's rollout file exists: until it does, `codex exec resume` cannot
    find the thread, so a session named before it is not yet one a later run can resume.

    Multica's two layouts, flat and by date (`YYYY/MM/DD`), plain or compressed; the newest
    dates first, as a new thread's file is there. Only names are read, through handles that
    follow no link (`opened_sessions`: `reader` and `linked` as there)."""
    if not thread:
        return False
    marker = f"-{thread}.jsonl"

    def holds(fd: int) -> bool:
        return any(n.startswith("rollout-") and marker in n for n in os.listdir(fd))

    try:
        with opened_sessions(home, reader, linked) as sessions:
            return holds(sessions) or _dated_holds(sessions, holds, 3, reader)
    except OSError:
        return False


@contextmanager
def opened_sessions(home: Path, reader: Owner | None, linked: Path | None) -> Iterator[int]:
    """A handle of the CLI's sessions folder in `home` (a task's Codex home).

    Without an agent user (`reader` None) every link is the daemon's own user's and is
    followed. With one, the task's folder and everything in it are the agent's to change:
    `home` is opened without following it, and its `sessions` is used only as the folder it
    is. When it is a link — the one the daemon made to the user's own sessions (`linked`,
    daemon/task/setup/codex_home.py) — that link is never followed, whatever it names now:
    `linked` is reached from the daemon's side instead, its own last two components not
    followed either. A folder the agent could not open itself is refused (EACCES)."""
    if reader is None:
        with opened_dir(home / "sessions", follow=True) as fd:
            yield fd
        return
    with opened_dir(home.parent, home.name) as home_fd:
        found = stat_at(home_fd, "sessions")
        if found is not None and stat.S_ISDIR(found.st_mode):
            with opened_at(home_fd, "sessions") as fd:
                yield _enterable(fd, reader)
            return
    if found is None or not stat.S_ISLNK(found.st_mode) or linked is None:
        raise OSError(errno.ENOENT, "no sessions folder", str(home / "sessions"))
    with opened_dir(linked.parent, linked.name) as fd:
        yield _enterable(fd, reader)


def _enterable(fd: int, reader: Owner) -> int:
    """`fd` when the agent user could list and enter that folder itself, else EACCES."""
    if not may_enter(os.fstat(fd), reader):
        raise OSError(errno.EACCES, "a folder the agent user cannot open")
    return fd


def _dated_holds(fd: int, holds: Callable[[int], bool], depth: int, reader: Owner | None) -> bool:
    for name in sorted((n for n in os.listdir(fd) if n.isdigit()), reverse=True):
        try:
            with opened_at(fd, name) as below:
                if reader is not None and not may_enter(os.fstat(below), reader):
                    continue
                if holds(below) if depth == 1 else _dated_holds(below, holds, depth - 1, reader):
                    return True
        except OSError:
            continue
    return False


def rollout_totals(
    home: Path, thread: str, reader: Owner | None = None, linked: Path | None = None
) -> dict[str, int]:
    """The thread's usage totals so far, from the last token count in its rollout file.

    Best effort: the rollout layout is the CLI's own; when it cannot be read the whole
    thread's usage is reported for this run. The sessions are the agent's (a link to its
    user's, `opened_sessions`): they are walked without following any link, and with an
    agent user (`reader`) a folder is entered and a file read only when that user could do
    so itself.
    """
    suffix = f"{thread}.jsonl"
    last: tuple[str, bytes] | None = None

    def visit(parent: int, name: str, info: os.stat_result) -> None:
        nonlocal last
        wanted = name.startswith("rollout-") and name.endswith(suffix)
        if wanted and stat.S_ISREG(info.st_mode) and (last is None or name > last[0]):
            last = (name, read_at(parent, name, _ROLLOUT_TAIL_BYTES, reader, tail=True))

    def enter(parent: int, name: str, info: os.stat_result) -> bool:
        return reader is None or may_enter(info, reader)

    try:
        with opened_sessions(home, reader, linked) as fd:
            walk_at(fd, enter, visit)
    except OSError:
        return {}
    if last is None:
        return {}
    lines = last[1].decode("utf-8", errors="replace").splitlines()
    for line in reversed(lines):
        if '"token_count"' not in line:
            continue
        try:
            # pydantic-core's parser refuses deep nesting (ValueError, never RecursionError).
            payload = from_json(line).get("payload") or {}
            totals = (payload.get("info") or {}).get("total_token_usage")
        except (ValueError, AttributeError):
            continue
        if isinstance(totals, dict):
            return thread_totals(totals)
    return {}
