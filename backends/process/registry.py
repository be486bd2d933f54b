"""The agent processes one daemon spawned, what each run was seen to start, and its orphans.

An agent can detach a process however it likes — `env -i setsid sleep 333 &` drops the
tracking tag and the session, and once the shell in between exits the sleeper is no longer
below the agent. A registry keeps what is needed to find it anyway:

* every run's members: a walk every `TRACK_INTERVAL` down from the agent and every member
  seen before records the processes below them, so a process seen once stays the run's after
  it detaches (the walk reads only the runs' own processes, or all of /proc when their
  threads outnumber the machine's processes: tree_reader.py; on the event loop when it is
  expected to take at most 5 ms, else in a worker thread);
* as a child subreaper the daemon adopts every orphan of its agents; an adopted orphan (a child
  of the daemon it did not spawn, in another session) belongs to the run whose members it was
  seen among, or whose work directory it still runs in.

The daemon makes one registry and hands it to every run in its spec (`RunSpec.processes`,
then `ProcessSpec.processes`); a run given none gets a private one (its own tree only).

A per-task cgroup (`cgroup.kill`) would find such a process without attribution, but the daemon
may rarely create one: it needs a delegated, writable cgroup v2 subtree (systemd's `Delegate=`,
not given to ordinary services; containers mount cgroupfs read-only), and moving the agent in
after the spawn races its first fork (anyio offers no pre-exec hook or `CLONE_INTO_CGROUP`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from backends.process.linux import become_subreaper
from backends.process.machine import SharedScans
from backends.process.tree import (
    ProcessTable,
    ProcIdentity,
    all_stats,
    cwd_of,
    identify,
    is_alive,
)
from backends.process.tree_reader import INLINE_COST, TreeReader

log = logging.getLogger(__name__)

TRACK_INTERVAL = 0.5
"""Seconds between two scans of a running agent's tree."""
REAP_INTERVAL = 2.0
"""How often a subreaper daemon looks for adopted orphans that died (one syscall if none)."""


@dataclass
class _Run:
    tag: str
    leader: ProcIdentity | None
    cwd: str
    members: dict[int, ProcIdentity] = field(default_factory=dict)


class ProcessRegistry:
    """One daemon's agent processes: leaders not yet reaped, and each run's members."""

    def __init__(
        self,
        scanner: Callable[[list[ProcIdentity], frozenset[int]], ProcessTable] | None = None,
        machine: SharedScans | None = None,
    ) -> None:
        """`scanner` reads the processes below the roots it is given (the agents among them
        named by pid: this process's own children; by default a `TreeReader`), `machine`
        every process (tests count their calls)."""
        self._scanner = scanner or TreeReader()
        self._machine = machine or SharedScans()
        self._leaders: set[int] = set()
        self._runs: dict[int, _Run] = {}
        """By the agent's pid: one task may have two agents (a resume falling back to fresh)."""
        self.adopts_orphans = False
        self._walking = False
        """Whether a run's tracker walks for every run now."""
        self._walker_left = anyio.Event()

    def adopt_orphans(self) -> bool:
        """Become the child subreaper of every agent tree; logs once whether that worked."""
        self.adopts_orphans = become_subreaper()
        if self.adopts_orphans:
            log.info("child subreaper: orphaned agent processes come back to the daemon")
        else:
            log.warning("not a child subreaper: orphans of agents are re-parented to init")
        return self.adopts_orphans

    def spawned(self, tag: str, pid: int, cwd: Path) -> ProcIdentity | None:
        """Register a just-spawned agent; call it with no await since the spawn returned."""
        self._leaders.add(pid)
        leader = identify(pid)
        self._runs[pid] = _Run(tag, leader, os.path.realpath(cwd))
        return leader

    def released(self, pid: int) -> None:
        """The agent `pid` was reaped by the event loop: it is no longer ours to skip."""
        self._leaders.discard(pid)

    def forget(self, pid: int) -> None:
        """The run of agent `pid` is over and its tree killed."""
        self._runs.pop(pid, None)

    def note(self, pid: int, scan: ProcessTable) -> None:
        """Record every process found below agent `pid` and its members in `scan`."""
        run = self._runs.get(pid)
        if run is None:
            return
        # A walk starts from every member known when it ran, so a member it did not cover has
        # exited (or its pid is another process's now): it never comes back, and keeping it
        # would make every later walk read it again.
        for gone in [p for p in run.members.values() if not scan.covers(p)]:
            del run.members[gone.pid]
        for member in scan.descendants(p.pid for p in _roots(run) if scan.covers(p)):
            run.members.setdefault(member.pid, member)

    def members(self, pid: int) -> list[ProcIdentity]:
        """The processes seen below agent `pid` and alive at the last walk (or since)."""
        run = self._runs.get(pid)
        return list(run.members.values()) if run else []

    async def track(self, interval: float = TRACK_INTERVAL) -> None:
        """Keep every registered run's tree tracked, for as long as the calling run lasts
        (until cancelled).

        One run's tracker at a time walks, for every run: each `interval` it reads all the
        runs' trees in one walk (in a worker thread) and records each run's members. The
        other trackers wait to take over when that run ends. Every tracker waking on each
        tick and queueing for the one walk cost 200 runs 400 wake-ups and lock hand-overs a
        second, about a tenth of the daemon's CPU at 200 idle tasks."""
        while True:
            if not self._walking:
                self._walking = True
                try:
                    await self._walk_every(interval)
                finally:
                    self._walking = False
                    left, self._walker_left = self._walker_left, anyio.Event()
                    left.set()  # the next tracker to run takes over
            else:
                await self._walker_left.wait()

    async def _walk_every(self, interval: float) -> None:
        while True:
            await anyio.sleep(interval - anyio.current_time() % interval)
            roots = [root for run in self._runs.values() for root in _roots(run)]
            agents = frozenset(self._leaders)
            scan = (
                self._scanner(roots, agents)
                if self._cheap_enough()
                else await anyio.to_thread.run_sync(self._scanner, roots, agents)
            )
            for pid in list(self._runs):
                self.note(pid, scan)

    def _cheap_enough(self) -> bool:
        """Whether the next walk may run on the event loop (tree_reader.py: `INLINE_COST`);
        a scanner that does not say what it costs runs in a worker thread."""
        cost = self._scanner.expected_cost() if isinstance(self._scanner, TreeReader) else None
        return cost is not None and cost <= INLINE_COST

    async def collect(self, pid: int, tag_var: str) -> list[ProcIdentity]:
        """The live processes of agent `pid`'s run: its tree, its tagged and tracked members,
        and the adopted orphans that are its own; from a scan of the machine begun after the
        call, which runs stopped at the same time share (`machine.SharedScans`)."""
        run = self._runs.get(pid)
        if run is None:
            return []
        machine = await self._machine.fresh(tag_var)
        scan = machine.table
        found = machine.run_of(run.leader, run.tag)
        roots = {p.pid: p for p in run.members.values() if is_alive(p)}
        if self.adopts_orphans:
            roots.update((p.pid, p) for p in self._orphans_of(run, scan))
        found.update(roots)
        for below in scan.descendants(list(roots)):
            found.setdefault(below.pid, below)
        return list(found.values())

    def _orphans_of(self, run: _Run, scan: ProcessTable) -> list[ProcIdentity]:
        me, my_session = os.getpid(), os.getsid(0)
        own: list[ProcIdentity] = []
        for child in scan.children(me):
            if child.pid in self._leaders or child.session == my_session:
                continue
            identity = ProcIdentity(child.pid, child.start_time)
            where = cwd_of(child.pid)
            if run.members.get(child.pid) == identity or _within(where, run.cwd):
                own.append(identity)
        return own

    def reap(self) -> list[int]:
        """Reap zombie orphans adopted by this subreaper; returns the reaped pids.

        Only zombies whose parent is this process, that are not agents it spawned and that
        live in another session than this process are reaped, each by its own pid:
        `waitpid(-1)` would steal exit statuses from the event loop's child watcher. Helper
        subprocesses spawned without a new session are therefore never touched.
        """
        if not self.adopts_orphans:
            return []  # only a subreaper is handed orphans; the rest are the event loop's
        me, my_session = os.getpid(), os.getsid(0)
        reaped: list[int] = []
        for stat in all_stats():
            if (
                stat.state != "Z"
                or stat.ppid != me
                or stat.pid in self._leaders
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

    async def reap_adopted(self, interval: float = REAP_INTERVAL) -> None:
        """Reap adopted orphans that died, every `interval`, for as long as the daemon runs."""
        while True:
            await anyio.sleep(interval)
            # In the event loop's thread on purpose: a fresh agent is registered with no await
            # after its spawn returned, so its exit status is never stolen here.
            if _exited_child():
                reaped = self.reap()
                if reaped:
                    log.info("reaped %d adopted orphan(s): pids %s", len(reaped), reaped)


def _roots(run: _Run) -> list[ProcIdentity]:
    """Where a walk for `run`'s members starts: its agent and every member seen so far."""
    return [*run.members.values(), *([run.leader] if run.leader else [])]


def _within(path: str, directory: str) -> bool:
    # A run in "/" (never a work directory) would claim every orphan.
    if not path or directory == "/":
        return False
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _exited_child() -> bool:
    """Whether any child waits to be reaped, without reaping it (one syscall)."""
    if not hasattr(os, "waitid"):
        return True
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False
