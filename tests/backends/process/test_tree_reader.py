"""Each tick's read of the agents' trees, the cheaper way (backends/process/tree_reader.py)."""

from __future__ import annotations

from backends.process.tree import ProcessTable, ProcIdentity, ProcStat
from backends.process.tree_reader import (
    RECOUNT_EVERY,
    WALK_FILE_COST,
    WALK_ROOT_COST,
    WHOLE_PROCESS_COST,
    TreeReader,
)

ROOTS = [ProcIdentity(10, 1), ProcIdentity(20, 1)]


def _stat(pid: int, ppid: int, threads: int) -> ProcStat:
    return ProcStat(pid, "S", ppid, pid, pid, 1, threads)


class _Reads:
    """A walk and a whole read of a made-up machine, recording which was taken."""

    def __init__(self, machine: int, threads: int) -> None:
        self.taken: list[str] = []
        self.threads = threads
        """Threads of each root."""
        self.machine = machine
        """Processes besides the two roots."""

    def walk(self, roots: list[ProcIdentity], agents: frozenset[int]) -> ProcessTable:
        self.taken.append("walk")
        return ProcessTable([], roots, reads=len(roots) * self.threads)

    def whole(self) -> ProcessTable:
        self.taken.append("whole")
        others = [_stat(100 + n, 1, 1) for n in range(self.machine)]
        roots = [_stat(root.pid, 1, self.threads) for root in ROOTS]
        return ProcessTable(others + roots)


def test_trees_of_few_threads_are_walked() -> None:
    """The first walk says what walks cost; one whole read says what the machine holds; from
    then on the cheaper walk."""
    reads = _Reads(machine=300, threads=1)
    reader = TreeReader(reads.walk, reads.whole)
    for _ in range(5):
        reader(ROOTS, frozenset())
    assert reads.taken == ["walk", "whole", "walk", "walk", "walk"]


def test_trees_whose_threads_outnumber_the_machines_processes_are_read_whole() -> None:
    reads = _Reads(machine=100, threads=200)
    reader = TreeReader(reads.walk, reads.whole)
    for _ in range(4):
        reader(ROOTS, frozenset())
    assert reads.taken == ["walk", "whole", "whole", "whole"]
    reads.threads = 1  # the agents' threads ended: walking is cheaper again
    reader(ROOTS, frozenset())
    reader(ROOTS, frozenset())
    assert reads.taken[-2:] == ["whole", "walk"]


def test_the_machine_is_counted_again_once_in_a_while() -> None:
    """A machine that ran fewer processes since would make reading it whole the cheaper."""
    reads = _Reads(machine=300, threads=1)
    reader = TreeReader(reads.walk, reads.whole)
    for _ in range(2 + RECOUNT_EVERY + 2):  # walk, whole, the walks, whole, walk
        reader(ROOTS, frozenset())
    assert reads.taken.count("whole") == 2
    assert reads.taken[-2:] == ["whole", "walk"]


def test_the_expected_cost_is_the_next_reads_once_a_read_of_its_kind_told() -> None:
    """Nothing before a walk and a whole read have told; then what the cheaper way costs, or
    the whole read's cost when it is due."""
    reads = _Reads(machine=300, threads=1)
    reader = TreeReader(reads.walk, reads.whole)
    assert reader.expected_cost() is None
    reader(ROOTS, frozenset())  # a walk: a whole read is due, and none told yet
    assert reader.expected_cost() is None
    reader(ROOTS, frozenset())  # the whole read
    walk = WALK_ROOT_COST * len(ROOTS) + WALK_FILE_COST * len(ROOTS)
    assert reader.expected_cost() == walk
    reads.threads = 500  # a walk reading 1,000 files: the whole read is due next
    reader(ROOTS, frozenset())
    assert reads.taken[-1] == "walk"
    assert reader.expected_cost() == WHOLE_PROCESS_COST * (300 + len(ROOTS))
