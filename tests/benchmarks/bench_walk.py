"""The tracking walk's CPU: what reading N agents' trees twice a second costs the daemon.

Run from the repo root: `python -m tests.benchmarks.bench_walk [agents] [walks]` (default 200
agents, 50 walks). Starts `agents` children that sleep (single-threaded, no children of their
own, as a quiet agent) and walks down from all of them as the registry does each tick
(`subtree_table`), two ways:

- as members: each root's stat is read for its start time;
- as agents (the daemon's own children, how the registry walks them): one `waitid` each.

Prints the CPU of one walk, per agent, and as a share of a core at the registry's two walks a
second. The machine's load moves every figure: compare the two lines of one run.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backends.process.registry import TRACK_INTERVAL
from backends.process.tree import ProcIdentity, identify, subtree_table


def _cpu_per_walk(roots: list[ProcIdentity], agents: frozenset[int], walks: int) -> float:
    for _ in range(3):
        subtree_table(roots, agents)
    began = time.process_time()
    for _ in range(walks):
        subtree_table(roots, agents)
    return (time.process_time() - began) / walks


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    walks = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    children = [subprocess.Popen(["sleep", "600"]) for _ in range(count)]
    try:
        roots = [root for root in map(identify, (c.pid for c in children)) if root is not None]
        pids = frozenset(c.pid for c in children)
        for name, agents in (("as members (stat read)", frozenset()), ("as agents (waitid)", pids)):
            per_walk = _cpu_per_walk(roots, agents, walks)
            share = per_walk / TRACK_INTERVAL * 100
            print(
                f"{count} roots {name}: {per_walk * 1e3:.2f} ms CPU a walk, "
                f"{per_walk / count * 1e6:.1f} µs a root, {share:.2f} % of a core"
            )
    finally:
        for child in children:
            child.kill()
            child.wait()


if __name__ == "__main__":
    main()
