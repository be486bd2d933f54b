"""The tracking walk's CPU: what reading N agents' trees twice a second costs the daemon.

Run from the repo root: `python -m tests.benchmarks.bench_walk [agents] [walks] [threads]`
(default 200 agents, 50 walks, 1 thread). Starts `agents` children that sleep (no children of
their own, as a quiet agent; each with `threads` threads: the Claude Code CLI idles with 9)
and walks down from all of them as the registry does each tick (`subtree_table`), two ways:

- as members: each root's stat is read for its start time;
- as agents (the daemon's own children, how the registry walks them): one `waitid` each.

A walk reads one children file per thread, so it is set beside one read of every process's
stat on the machine (`process_table`), which costs the same whatever the threads, and beside
the registry's `TreeReader`, which takes the cheaper of the two.

Prints the CPU of one walk, per agent, and as a share of a core at the registry's two walks a
second. The machine's load moves every figure: compare the lines of one run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backends.process.registry import TRACK_INTERVAL
from backends.process.tree import identify, process_table, subtree_table
from backends.process.tree_reader import TreeReader


def _cpu_per_walk(walk: Callable[[], object], walks: int) -> float:
    for _ in range(3):
        walk()
    began = time.process_time()
    for _ in range(walks):
        walk()
    return (time.process_time() - began) / walks


def _sleeper(threads: int) -> list[str]:
    """A process sleeping in `threads` threads."""
    code = (
        "import threading, time\n"
        f"for _ in range({threads - 1}):\n"
        "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
        "time.sleep(600)\n"
    )
    return [sys.executable, "-c", code] if threads > 1 else ["sleep", "600"]


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    walks = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    children = [subprocess.Popen(_sleeper(threads)) for _ in range(count)]
    try:
        while any(len(os.listdir(f"/proc/{c.pid}/task")) < threads for c in children):
            time.sleep(0.1)
        roots = [root for root in map(identify, (c.pid for c in children)) if root is not None]
        pids = frozenset(c.pid for c in children)
        ways = {
            "as members (stat read)": partial(subtree_table, roots, frozenset()),
            "as agents (waitid)": partial(subtree_table, roots, pids),
            "the whole machine's stats": process_table,
            "the registry's reader (the cheaper way)": partial(TreeReader(), roots, pids),
        }
        for name, walk in ways.items():
            per_walk = _cpu_per_walk(walk, walks)
            share = per_walk / TRACK_INTERVAL * 100
            print(
                f"{count} roots × {threads} threads, {name}: {per_walk * 1e3:.2f} ms CPU a "
                f"walk, {per_walk / count * 1e6:.1f} µs a root, {share:.2f} % of a core"
            )
    finally:
        for child in children:
            child.kill()
            child.wait()


if __name__ == "__main__":
    main()
