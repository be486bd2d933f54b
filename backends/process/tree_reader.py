"""Reading the agents' trees each tick the cheaper of two ways.

A walk down from the roots (`tree.subtree_table`) reads a children file for every thread of
every process in the trees; reading the whole machine (`tree.process_table`) reads one stat
for every process on it. For single-threaded agents the walk is cheaper; the Claude Code CLI
idles with 9 threads, and 200 such agents cost 18.7 ms a walk (3.7 % of a core at two walks a
second) where the whole machine's stats took 4.7 ms (`python -m tests.benchmarks.bench_walk
200 30 9`). Each read tells what the other way would cost: a walk how many files it read, a
whole read how many processes the machine runs and how many threads the trees hold.

The same estimate says where the read runs (`ProcessRegistry`): one expected to take at most
`INLINE_COST` runs on the event loop, a longer one in a worker thread. In a thread each of a
walk's few hundred system calls takes the interpreter's lock back from the loop, two thread
switches each: at 200 single-threaded agents (3.2 ms a walk) the daemon spent 5 % more CPU
with the walk in a thread than on the loop (bench_load 200x1, four alternating runs).
"""

from __future__ import annotations

from collections.abc import Callable

from backends.process.tree import ProcessTable, ProcIdentity, process_table, subtree_table

Walk = Callable[[list[ProcIdentity], frozenset[int]], ProcessTable]

# What each read costs, in µs of CPU (bench_walk, 200 roots of 1 and of 9 threads, on a small
# VM): a walk, for each root (a `waitid`, its thread list) and for each children file; a whole
# read, for each process's stat.
WALK_ROOT_COST = 6
WALK_FILE_COST = 10
WHOLE_PROCESS_COST = 15
INLINE_COST = 5_000
"""µs a read may be expected to take and still run on the event loop (it holds the loop that
long, twice a second)."""
RECOUNT_EVERY = 120
"""Walks after which the whole machine is read once more, to learn how many processes it runs
now (a minute at two walks a second)."""


class TreeReader:
    """The processes below the roots, read whichever way the last read says is cheaper."""

    def __init__(
        self, walk: Walk = subtree_table, whole: Callable[[], ProcessTable] = process_table
    ) -> None:
        self._walk = walk
        self._whole = whole
        self._walk_cost = 0
        """What a walk would cost: its roots, and a children file per thread in the trees."""
        self._whole_cost = 0
        """What a whole read would cost: the processes at the last one (0: not read yet)."""
        self._walks = 0
        """Walks since the last whole read."""

    def expected_cost(self) -> int | None:
        """µs of CPU the next read should take, from the last; None before the first of its
        kind (no read has told yet)."""
        if self._whole_due():
            return self._whole_cost or None
        return self._walk_cost if self._walks or self._whole_cost else None

    def __call__(self, roots: list[ProcIdentity], agents: frozenset[int]) -> ProcessTable:
        """The processes below `roots` now (`agents`: the roots that are this process's own
        children, as `subtree_table` takes them)."""
        if self._whole_due():
            table = self._whole()
            self._whole_cost = WHOLE_PROCESS_COST * table.size
            self._walk_cost = _walk_cost(roots, table.threads_below(roots))
            self._walks = 0
            return table
        table = self._walk(roots, agents)
        self._walk_cost = _walk_cost(roots, table.reads)
        self._walks += 1
        return table

    def _whole_due(self) -> bool:
        return self._walk_cost > self._whole_cost or self._walks >= RECOUNT_EVERY


def _walk_cost(roots: list[ProcIdentity], files: int) -> int:
    return WALK_ROOT_COST * len(roots) + WALK_FILE_COST * files
