"""Finding a tree in /proc: who descends from whom, who is still alive (`tags`: who carries a
tag).

A pid alone is not an identity: pids are reused. Every helper here pairs a pid with the
process's start time (field 22 of `/proc/PID/stat`, clock ticks since boot), so a recycled
pid is never taken for the process it once was (`kill.signal_group_of` signals only after
checking that pair still matches).

Linux only. Elsewhere the helpers degrade to what `os` offers: a process is identified by its
pid alone, there are no descendants or tags to find, and a kill is a plain process-group kill.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

log = logging.getLogger(__name__)

_PROC = Path("/proc")
_HAVE_PROC = sys.platform == "linux" and (_PROC / "self" / "stat").exists()
_GONE_STATES = frozenset({"Z", "X", "x"})
# `/proc/PID/task/TID/children` (CONFIG_PROC_CHILDREN, on in common distribution kernels) names
# a thread's children, so a tree is found by reading only its own processes.
_HAVE_CHILDREN = _HAVE_PROC and os.path.exists("/proc/thread-self/children")


@dataclass(frozen=True, slots=True)
class ProcIdentity:
    """A process as pid plus start time, so a reused pid is never mistaken for it."""

    pid: int
    start_time: int


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of `/proc/PID/stat` that finding and reaping a tree needs."""

    pid: int
    state: str
    ppid: int
    pgid: int
    session: int
    start_time: int
    threads: int = 1

    @property
    def gone(self) -> bool:
        return self.state in _GONE_STATES


def _read_stat(pid: int) -> ProcStat | None:
    try:
        # os-level calls: a scan reads every process's stat, and pathlib's objects cost more
        # than the read itself.
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields after the last ')'
    # are fixed, starting with field 3 (state).
    try:
        rest = data[data.rindex(b")") + 2 :].split()
        return ProcStat(
            pid=pid,
            state=rest[0].decode("ascii", "replace"),
            ppid=int(rest[1]),
            pgid=int(rest[2]),
            session=int(rest[3]),
            threads=int(rest[17]),
            start_time=int(rest[19]),
        )
    except (ValueError, IndexError):
        return None


def all_pids() -> Iterator[int]:
    """Every pid in /proc now (none where there is no /proc)."""
    try:
        entries = list(os.scandir(_PROC))
    except OSError:
        return
    for entry in entries:
        if entry.name.isdigit():
            yield int(entry.name)


def all_stats() -> Iterator[ProcStat]:
    """Every process's stat, zombies included (nothing where there is no /proc)."""
    if not _HAVE_PROC:
        return
    for pid in all_pids():
        stat = _read_stat(pid)
        if stat is not None:
            yield stat


def _live_stat(identity: ProcIdentity) -> ProcStat | None:
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


class ProcessTable:
    """Live processes by parent, read from /proc at one moment: all of them, or those below
    the roots a walk started from. One read answers many questions."""

    def __init__(
        self,
        stats: Iterable[ProcStat],
        walked: Iterable[ProcIdentity] | None = None,
        reads: int = 0,
    ) -> None:
        """`walked`: the roots a walk started from (None: every process was read)."""
        self._children: dict[int, list[ProcStat]] = {}
        self._live: dict[int, ProcStat] = {}
        for stat in stats:
            if not stat.gone:
                self._children.setdefault(stat.ppid, []).append(stat)
                self._live[stat.pid] = stat
        self._walked = None if walked is None else frozenset(walked)
        self.reads = reads
        """The children files a walk read to build it (0 for every process read)."""

    @property
    def size(self) -> int:
        """The live processes read."""
        return len(self._live)

    def covers(self, root: ProcIdentity) -> bool:
        """Whether the processes below `root` are in this table: false for a root that was
        not walked, or whose pid belonged to another process by then; with every process
        read, false for a root no longer alive."""
        if self._walked is not None:
            return root in self._walked
        live = self._live.get(root.pid)
        return live is not None and live.start_time == root.start_time

    def threads_below(self, roots: Iterable[ProcIdentity]) -> int:
        """The threads of the live `roots` and of every process below them: the children
        files a walk down from them reads (with every process read)."""
        pids = [root.pid for root in roots if self.covers(root)]
        pids += [below.pid for below in self.descendants(pids)]
        return sum(self._live[pid].threads for pid in pids if pid in self._live)

    def children(self, pid: int) -> list[ProcStat]:
        """The live children of `pid`."""
        return list(self._children.get(pid, []))

    def descendants(self, pids: Iterable[int]) -> list[ProcIdentity]:
        """Every live process below any of `pids`, by parent links (the roots excluded)."""
        queue = list(pids)
        seen = set(queue)
        found: list[ProcIdentity] = []
        while queue:
            for child in self._children.get(queue.pop(), []):
                if child.pid not in seen:
                    seen.add(child.pid)
                    found.append(ProcIdentity(child.pid, child.start_time))
                    queue.append(child.pid)
        return found


def process_table() -> ProcessTable:
    """Read every process's parent link now (empty where there is no /proc)."""
    return ProcessTable(all_stats())


def subtree_table(
    roots: Iterable[ProcIdentity], children: Container[int] = frozenset()
) -> ProcessTable:
    """The processes below `roots` now, read by walking down from them.

    A root whose pid now belongs to another process is not walked, nor one that exited.
    `children`: pids of roots that are this process's own children (its agents). No other
    process can hold such a pid until it is reaped, and once reaped the kernel says it is no
    child of ours, so whether it still runs is one `waitid` call. Any other root's stat is
    read for its start time: three syscalls and a line the kernel formats, which made up half
    of a walk's time (a walk over 200 agents: 42–46 µs a root, 23–25 with `children`). Costs a
    few reads per process in the trees instead of one per process on the machine; where the
    kernel offers no children files it is a whole `process_table()`.
    """
    if not _HAVE_CHILDREN:
        return process_table()
    walked = [
        root
        for root in roots
        if (_running_child(root.pid) if root.pid in children else _live_stat(root) is not None)
    ]
    queue = [root.pid for root in walked]
    seen = set(queue)
    found: list[ProcStat] = []
    reads = 0
    while queue:
        pids, files = _child_pids(queue.pop())
        reads += files
        for pid in pids:
            if pid in seen:
                continue
            seen.add(pid)
            stat = _read_stat(pid)
            if stat is not None:
                found.append(stat)
                queue.append(pid)
    return ProcessTable(found, walked, reads)


def _running_child(pid: int) -> bool:
    """Whether `pid`, a child of this process, still runs (neither exited nor reaped); reaps
    nothing (`WNOWAIT`), so its exit status stays the event loop's."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:  # reaped already, or not ours
        return False


def _child_pids(pid: int) -> tuple[list[int], int]:
    """The children of every thread of `pid` (none if it is gone), and the files read."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return [], 0
    pids: list[int] = []
    for tid in threads:
        try:
            fd = os.open(f"/proc/{pid}/task/{tid}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # the thread just ended
            continue
        try:
            data = b"".join(iter(partial(os.read, fd, 65536), b""))
        except OSError:
            continue
        finally:
            os.close(fd)
        pids.extend(int(p) for p in data.split())
    return pids, len(threads)


def descendants(pid: int) -> list[ProcIdentity]:
    """Every live process below `pid`, found by walking parent links (the root excluded)."""
    return process_table().descendants([pid])


def group_of(identity: ProcIdentity) -> int | None:
    """The process group of a live process, or None if it is gone or its pid was reused."""
    if not _HAVE_PROC:
        try:
            return os.getpgid(identity.pid)
        except OSError:
            return None
    stat = _live_stat(identity)
    return None if stat is None else stat.pgid


def cwd_of(pid: int) -> str:
    """The working directory of a process ("" if gone, not ours to read, or no /proc)."""
    try:
        return os.readlink(_PROC / str(pid) / "cwd") if _HAVE_PROC else ""
    except OSError:
        return ""


def tree_in(leader: ProcIdentity, scan: ProcessTable) -> list[ProcIdentity]:
    """`leader` and its descendants in `scan`, read after `scan` began; none if it is gone.

    The leader alive now, as the same process, was alive throughout the scan: its pid named
    it there, so the walk below it is its own."""
    if not is_alive(leader):
        return []
    return [leader, *scan.descendants([leader.pid])]


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
