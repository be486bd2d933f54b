"""Process-tree facts from /proc: who descends from whom, who carries a tag, who is still alive.

A pid alone is not an identity: pids are reused. Every helper here pairs a pid with the
process's start time (field 22 of `/proc/PID/stat`, clock ticks since boot) and signals a
process only after checking that pair still matches, so a recycled pid is never hit.

Linux only. Elsewhere the helpers degrade to what `os` offers: a process is identified by its
pid alone, there are no descendants or tags to find, and a kill is a plain process-group kill.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_PROC = Path("/proc")
_HAVE_PROC = sys.platform == "linux" and (_PROC / "self" / "stat").exists()
_PR_SET_CHILD_SUBREAPER = 36
_GONE_STATES = frozenset({"Z", "X", "x"})


@dataclass(frozen=True, slots=True)
class ProcIdentity:
    """A process as pid plus start time, so a reused pid is never mistaken for it."""

    pid: int
    start_time: int


@dataclass(frozen=True, slots=True)
class _Stat:
    pid: int
    state: str
    ppid: int
    pgid: int
    session: int
    start_time: int

    @property
    def gone(self) -> bool:
        return self.state in _GONE_STATES


def _read_stat(pid: int) -> _Stat | None:
    try:
        data = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields after the last ')'
    # are fixed, starting with field 3 (state).
    try:
        rest = data[data.rindex(b")") + 2 :].split()
        return _Stat(
            pid=pid,
            state=rest[0].decode("ascii", "replace"),
            ppid=int(rest[1]),
            pgid=int(rest[2]),
            session=int(rest[3]),
            start_time=int(rest[19]),
        )
    except (ValueError, IndexError):
        return None


def _all_pids() -> Iterator[int]:
    try:
        entries = list(os.scandir(_PROC))
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit():
            yield int(entry.name)


def _all_stats() -> Iterator[_Stat]:
    for pid in _all_pids():
        stat = _read_stat(pid)
        if stat is not None:
            yield stat


def _live_stat(identity: ProcIdentity) -> _Stat | None:
    stat = _read_stat(identity.pid)
    if stat is None or stat.gone or stat.start_time != identity.start_time:
        return None
    return stat


def identify(pid: int) -> ProcIdentity | None:
    """The identity of a running process, or None if it is gone (a zombie counts as gone)."""
    if not _HAVE_PROC:
        return ProcIdentity(pid, 0) if _exists(pid) else None
    stat = _read_stat(pid)
    if stat is None or stat.gone:
        return None
    return ProcIdentity(pid, stat.start_time)


def is_alive(identity: ProcIdentity) -> bool:
    """True while the same process (same pid and start time) runs; zombies count as gone."""
    if not _HAVE_PROC:
        return _exists(identity.pid)
    return _live_stat(identity) is not None


def descendants(pid: int) -> list[ProcIdentity]:
    """Every live process below `pid`, found by walking parent links (the root excluded)."""
    if not _HAVE_PROC:
        return []
    children: dict[int, list[_Stat]] = {}
    for stat in _all_stats():
        if not stat.gone:
            children.setdefault(stat.ppid, []).append(stat)
    found: list[ProcIdentity] = []
    queue = [pid]
    seen = {pid}
    while queue:
        for child in children.get(queue.pop(), []):
            if child.pid not in seen:
                seen.add(child.pid)
                found.append(ProcIdentity(child.pid, child.start_time))
                queue.append(child.pid)
    return found


def tagged(tag_var: str, value: str) -> list[ProcIdentity]:
    """Live processes (other than this one) whose initial environment has `tag_var=value`."""
    if not _HAVE_PROC or not value:
        return []
    needle = f"{tag_var}={value}".encode()
    me = os.getpid()
    found: list[ProcIdentity] = []
    for pid in _all_pids():
        if pid == me:
            continue
        try:
            environ = (_PROC / str(pid) / "environ").read_bytes()
        except OSError:  # another user's process, or it just exited
            continue
        if needle in environ and needle in environ.split(b"\0"):
            identity = identify(pid)
            if identity is not None:
                found.append(identity)
    return found


def group_of(identity: ProcIdentity) -> int | None:
    """The process group of a live process, or None if it is gone or its pid was reused."""
    if not _HAVE_PROC:
        try:
            return os.getpgid(identity.pid)
        except OSError:
            return None
    stat = _live_stat(identity)
    return None if stat is None else stat.pgid


def signal_group_of(identity: ProcIdentity, sig: int) -> bool:
    """Signal the process group of a process that is provably still the same one.

    Returns whether a signal was sent. A process in this daemon's own group (or init's) is
    signalled alone, never through its group, so the daemon can never signal itself.
    """
    pgid = group_of(identity)
    if pgid is None or identity.pid in (0, 1, os.getpid()):
        return False
    try:
        if pgid > 1 and pgid != os.getpgrp():
            os.killpg(pgid, sig)
        else:
            os.kill(identity.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def become_subreaper() -> bool:
    """Adopt orphaned descendants (PR_SET_CHILD_SUBREAPER) so they cannot escape to PID 1."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
    if not ok:
        log.warning("could not become a child subreaper: errno %d", ctypes.get_errno())
    return ok


def reap_orphans(exclude: set[int]) -> list[int]:
    """Reap zombie orphans adopted by this subreaper; returns the reaped pids.

    Only zombies whose parent is this process, that are not in `exclude` (the children this
    process spawned itself) and that live in another session than this process are reaped,
    each by its own pid: `waitpid(-1)` would steal exit statuses from the event loop's child
    watcher. Helper subprocesses spawned without a new session are therefore never touched.
    """
    if not _HAVE_PROC:
        return []
    me, my_session = os.getpid(), os.getsid(0)
    reaped: list[int] = []
    for stat in _all_stats():
        if (
            stat.state != "Z"
            or stat.ppid != me
            or stat.pid in exclude
            or stat.session == my_session
        ):
            continue
        try:
            pid, _ = os.waitpid(stat.pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if pid == stat.pid:
            reaped.append(pid)
    return reaped


def kill_leftovers(
    records: Iterable[ProcIdentity], tag_var: str, tag_value: str, grace: float
) -> list[int]:
    """Kill what a previous daemon left running: SIGTERM by group, `grace`, then SIGKILL.

    Only recorded processes whose start time still matches, and processes carrying
    `tag_var=tag_value`, are signalled. Blocks for up to `grace` (plus a short SIGKILL wait);
    call it from a worker thread inside the event loop. Returns the pids it signalled.
    """
    targets = {r.pid: r for r in records if is_alive(r)}
    for identity in tagged(tag_var, tag_value):
        targets.setdefault(identity.pid, identity)
    signalled = [t.pid for t in targets.values() if signal_group_of(t, signal.SIGTERM)]
    if not signalled:
        return []
    _wait_gone_blocking(targets.values(), grace)
    for target in targets.values():
        if is_alive(target) and signal_group_of(target, signal.SIGKILL):
            log.warning("leftover pid %d ignored SIGTERM; sent SIGKILL", target.pid)
    _wait_gone_blocking(targets.values(), 1.0)
    return sorted(signalled)


def _wait_gone_blocking(identities: Iterable[ProcIdentity], timeout: float) -> None:
    pending = list(identities)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        time.sleep(0.01)
        pending = [p for p in pending if is_alive(p)]


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
