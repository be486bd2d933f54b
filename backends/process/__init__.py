"""Agent processes: spawning one, finding its tree, killing it, and sweeping after a crash.

* `spawn` — `run_process`: the agent in its own session, its pipes, framed lines (`lines`)
  read and parsed by the run's consumer as it takes them, as its `spec` (`ProcessSpec`) says;
* `tree` — who descends from whom, who is still the same process;
* `tags` — who carries the tracking tag in its initial environment;
* `registry` — one daemon's agents, each run's members seen while it ran, its adopted orphans;
* `machine` — the reading of every process a stop needs, off the event loop, shared by the
  runs stopped at the same time;
* `kill` — the one kill routine (SIGTERM by group, a grace, SIGKILL), for live runs and sweeps,
  and the one way to signal a group (`signal_group_of`, never a reused pid, never our own);
* `sweep` — the crash-recovery sweep of what a previous daemon's run left;
* `identity` — the user an agent starts as (`AgentUser`), when a root daemon has one;
* `linux` — the Linux-only facts (child subreaper, boot id, dumpable, no_new_privs),
  answering "none" elsewhere;
* `child_watch` — the event loop hears each agent's exit through a pidfd on Python 3.11, as
  3.12 does by default, not through a thread per agent.

Why /proc and not psutil: the identity a record keeps across a daemon crash must compare
exactly. /proc gives a process's start time in clock ticks since boot, fixed for its life;
psutil's `create_time()` on Linux is that value added to a boot time it derives from the wall
clock, which moves when the clock is stepped, so a record written before a crash could stop
matching after it and the leftover would be spared. The parts that make a kill complete on
Linux (the child subreaper, the boot id) stay Linux-only with psutil too, so it would buy a
partial macOS port at the price of a compiled dependency for every install. Elsewhere the
`tree` helpers degrade to plain `os` calls: a run is stopped by its process group, and what
leaves the group is not found. Only Linux is tested.
"""

from __future__ import annotations

from backends.process.kill import kill_tree, signal_group_of
from backends.process.lines import MAX_LINE_BYTES, LineFramer, clean_line
from backends.process.linux import boot_id
from backends.process.machine import collect_tree
from backends.process.registry import ProcessRegistry
from backends.process.spawn import TRACKING_ENV, ProcessRun, run_process
from backends.process.spec import ProcessSpec
from backends.process.sweep import sweep
from backends.process.tags import tagged
from backends.process.tree import (
    ProcIdentity,
    descendants,
    group_of,
    identify,
    is_alive,
)

__all__ = [
    "MAX_LINE_BYTES",
    "TRACKING_ENV",
    "LineFramer",
    "ProcIdentity",
    "ProcessRegistry",
    "ProcessRun",
    "ProcessSpec",
    "boot_id",
    "clean_line",
    "collect_tree",
    "descendants",
    "group_of",
    "identify",
    "is_alive",
    "kill_tree",
    "run_process",
    "signal_group_of",
    "sweep",
    "tagged",
]
