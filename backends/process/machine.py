"""One reading of every process on the machine, shared by the runs being stopped at once.

Stopping a run looks for its processes twice (before the SIGTERM and after the grace) among
every process on the machine: the parent links, and the initial environment of each, for
the processes that carry the run's tracking tag. That is a few reads per process — about
15 ms with 250 processes, more on a busy host. Read on the event loop, once per run, 200
runs ending together held it for seconds, and every other run's transcript and heartbeat
waited. So the reading runs in a worker thread, and runs that ask while one is under way
share the next one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio
import anyio.to_thread

from backends.process.tags import environs, tag_values
from backends.process.tree import (
    ProcessTable,
    ProcIdentity,
    identify,
    process_table,
    tree_in,
)


@dataclass(frozen=True)
class MachineScan:
    """Every process at one moment: parent links, and who carries which value of one tag."""

    table: ProcessTable
    tags: Mapping[str, tuple[ProcIdentity, ...]]

    def tagged(self, value: str) -> tuple[ProcIdentity, ...]:
        """The processes whose initial environment had the tag set to `value`."""
        return self.tags.get(value, ()) if value else ()

    def run_of(self, leader: ProcIdentity | None, tag: str) -> dict[int, ProcIdentity]:
        """A run's live processes in this reading, by pid: its leader and every process below
        it (while the leader is the same process), and every process carrying its `tag`."""
        found = {p.pid: p for p in tree_in(leader, self.table)} if leader is not None else {}
        for identity in self.tagged(tag):
            found.setdefault(identity.pid, identity)
        return found


def collect_tree(leader: ProcIdentity | None, tag_var: str, tag_value: str) -> list[ProcIdentity]:
    """The live processes of a run: the leader, its descendants, and every process whose
    `tag_var` is `tag_value` (reads the whole machine: call it off the event loop)."""
    return list(machine_scan(tag_var).run_of(leader, tag_value).values())


def machine_scan(tag_var: str) -> MachineScan:
    """Read every process's parent link and its values of `tag_var` now (blocking)."""
    table = process_table()
    tags: dict[str, list[ProcIdentity]] = {}
    for pid, environ in environs():
        values = tag_values(environ, tag_var)
        identity = identify(pid) if values else None
        if identity is None:
            continue
        for value in values:
            tags.setdefault(value, []).append(identity)
    return MachineScan(table, {value: tuple(found) for value, found in tags.items()})


class SharedScans:
    """Scans of the whole machine, each begun after the call that returns it, so none misses a
    process that lived when its caller asked; callers that wait together share one."""

    def __init__(self, scan: Callable[[str], MachineScan] = machine_scan) -> None:
        """`scan` reads the machine (tests count its calls)."""
        self._scan = scan
        self._lock = anyio.Lock()
        self._last: tuple[float, str, MachineScan] | None = None

    async def fresh(self, tag_var: str) -> MachineScan:
        """A scan begun no earlier than this call, read in a worker thread."""
        asked = anyio.current_time()
        async with self._lock:
            last = self._last
            if last is None or last[0] < asked or last[1] != tag_var:
                began = anyio.current_time()
                scan = await anyio.to_thread.run_sync(self._scan, tag_var)
                last = self._last = (began, tag_var, scan)
            return last[2]
