"""One run's cgroup in each tree: its members, its kill, what its limits did, its removal."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from backends.process.cgroup_trees import V2

log = logging.getLogger(__name__)

_GONE_WITHIN = 5.0
"""Seconds the kernel gets to take a killed group's processes before it is left in place."""


@dataclass
class RunGroup:
    """One run's group in each tree: its members, its kill, its counters."""

    dirs: dict[str, Path]

    def procs_files(self) -> list[str]:
        """Each tree's `cgroup.procs`: what the launcher writes itself into."""
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def pids(self) -> set[int]:
        """Every process in the group now (the v2 tree's view, else any tree's)."""
        found: set[int] = set()
        for path in self._members_dirs():
            with contextlib.suppress(OSError):
                found |= {int(p) for p in (path / "cgroup.procs").read_text().split()}
        return found

    def empty(self) -> bool:
        """Whether no process is left in the group."""
        v2 = self.dirs.get(V2)
        if v2 is not None:
            with contextlib.suppress(OSError):
                for line in (v2 / "cgroup.events").read_text().splitlines():
                    if line.startswith("populated "):
                        return line.split()[1] == "0"
        return not self.pids()

    def kill(self) -> None:
        """SIGKILL every process in the group: `cgroup.kill` where the kernel has it, else each
        member (none can leave the group; a fork storm is bounded by `pids.max`)."""
        v2 = self.dirs.get(V2)
        if v2 is not None:
            try:
                (v2 / "cgroup.kill").write_text("1")
                return
            except OSError:
                pass
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer killed in the group (its memory limit reached)."""
        return max(
            _counter(self.dirs.get(V2), "memory.events", "oom_kill"),
            _counter(self.dirs.get("memory"), "memory.oom_control", "oom_kill"),
        )

    def pids_refused(self) -> int:
        """Forks the group's `pids.max` refused."""
        return max(
            _counter(self.dirs.get(V2), "pids.events", "max"),
            _counter(self.dirs.get("pids"), "pids.events", "max"),
        )

    def remove(self) -> bool:
        """Remove the group's directories (each must be empty); whether all went."""
        gone = True
        for path in self.dirs.values():
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                gone = False
                log.warning("cgroup %s not removed: %s", path, os.strerror(exc.errno or 0))
        return gone

    def _members_dirs(self) -> Iterator[Path]:
        if V2 in self.dirs:
            yield self.dirs[V2]
        else:
            yield from self.dirs.values()


def _counter(directory: Path | None, name: str, key: str) -> int:
    if directory is None:
        return 0
    try:
        text = (directory / name).read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


async def emptied(group: RunGroup, limit_reached: Callable[[str], None]) -> None:
    """Kill what is left in the run's cgroup, wait (bounded) for the kernel to take it, count
    the limits that acted, and remove the group."""
    delay = 0.002
    with anyio.move_on_after(_GONE_WITHIN):
        while not group.empty():
            group.kill()
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.05)
    if group.oom_kills():
        limit_reached("memory")
    if group.pids_refused():
        limit_reached("pids")
    if not group.remove():
        log.error("cgroup of the run still holds processes: %s", sorted(group.pids()))
