"""Real child processes for tests: argv for inline Python, and which processes outlived a run."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Iterable
from pathlib import Path

from backends.process import TRACKING_ENV, ProcIdentity, is_alive, tagged
from daemon.boundary.pool import threads_live


def python(code: str) -> list[str]:
    """argv running `code` (dedented) in a fresh interpreter."""
    return [sys.executable, "-c", textwrap.dedent(code)]


def survivors(procs: Iterable[ProcIdentity], within: float = 0.0) -> list[ProcIdentity]:
    """The processes still alive (a reused pid does not count), after waiting up to `within`
    seconds for them to go."""
    procs = list(procs)
    deadline = time.monotonic() + within
    while True:
        alive = [p for p in procs if is_alive(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.01)


def task_processes(task_id: str) -> list[ProcIdentity]:
    """The live processes still carrying the task's tracking tag (its agent's whole tree)."""
    return tagged(TRACKING_ENV, task_id)


def named(marker: str) -> list[int]:
    """Pids of the processes whose command line holds `marker` and that still run something
    (a leader thread gone with another running on included): found by name, as a leftover
    that dropped its environment and its parents can only be."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        process = Path("/proc", entry)
        try:
            if marker.encode() not in (process / "cmdline").read_bytes():
                continue
        except OSError:
            continue
        if threads_live(process):
            found.append(int(entry))
    return found
