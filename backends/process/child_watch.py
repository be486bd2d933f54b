"""How the event loop hears that an agent exited: through a pidfd, not a thread per agent.

Before Python 3.12, asyncio waits for each subprocess in a thread of its own blocked in
`waitpid()` (`ThreadedChildWatcher`): a daemon running 200 agents held 200 threads, about
3 MB of memory (each thread's stack and frame chunk). Python 3.12 and later use pidfds by
default where the kernel has them (Linux 5.3+); on 3.11 the daemon installs asyncio's
`PidfdChildWatcher` on its event loop for as long as it runs: one descriptor per agent, read
by the loop itself.

The one asyncio import under backends/ and daemon/: which child watcher spawns use is
asyncio's own policy, which anyio leaves to it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def _pidfds_work() -> bool:
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel before 5.3, or a seccomp filter refusing it
        return False
    return True


@contextmanager
def pidfd_child_watcher() -> Iterator[bool]:
    """While inside (in the daemon's running event loop), subprocesses this loop spawns are
    awaited through pidfds; yields whether that was installed (False where asyncio already
    does so or the kernel cannot). Enter it before the first spawn."""
    if sys.version_info >= (3, 12) or not _pidfds_work():
        yield False
        return
    import asyncio  # only here: see the module's docstring

    default = asyncio.get_child_watcher()  # the thread-per-child one; closing it is a no-op
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.set_child_watcher(watcher)
    try:
        yield True
    finally:
        asyncio.set_child_watcher(default)  # every agent of this loop is reaped by now
