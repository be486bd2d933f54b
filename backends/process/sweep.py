"""The crash-recovery sweep: kill what a previous daemon's run left, by record and by tag."""

from __future__ import annotations

from functools import partial

import anyio.to_thread

from backends.base import NullObserver, RunObserver
from backends.process.kill import kill_tree
from backends.process.machine import collect_tree
from backends.process.spawn import TRACKING_ENV
from backends.process.tree import ProcIdentity


async def sweep(
    leader: ProcIdentity | None,
    tag: str,
    grace: float,
    observer: RunObserver | None = None,
    tag_var: str = TRACKING_ENV,
) -> tuple[list[int], list[int]]:
    """Kill a left-over run's tree; returns (pids found alive, pids that survived SIGKILL).

    `leader` is signalled only while its start time still matches (never a reused pid);
    its descendants and every process carrying `tag_var=tag` go with it.
    """
    collect = partial(anyio.to_thread.run_sync, partial(collect_tree, leader, tag_var, tag))
    # A group signal takes the rest of the group with it: report every process found alive
    # before the kill, not the ones signalled one by one.
    found = sorted(p.pid for p in await collect())
    if found:
        await kill_tree(collect, grace, observer or NullObserver(), tag)
    return found, sorted(p.pid for p in await collect())
