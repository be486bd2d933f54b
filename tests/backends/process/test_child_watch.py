"""How the event loop hears its agents exit, on every Python the project runs on: a pidfd per
agent, never a thread blocked in `waitpid()` for each."""

from __future__ import annotations

import signal
import sys
import threading

import anyio
import pytest

from backends.process.child_watch import pidfd_child_watcher

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pidfds are Linux only")

AGENTS = 6


@pytest.mark.anyio
async def test_running_agents_hold_no_thread_each() -> None:
    """Six agents alive at once add no thread: the loop reads a descriptor for each (3.11:
    the watcher installed here; 3.12 on: asyncio's own)."""
    with pidfd_child_watcher():
        before = threading.active_count()
        agents = [await anyio.open_process(["sleep", "30"]) for _ in range(AGENTS)]
        try:
            during = threading.active_count()
        finally:
            for agent in agents:
                agent.send_signal(signal.SIGKILL)
            with anyio.fail_after(10):
                codes = [await agent.wait() for agent in agents]
    assert during - before < AGENTS, f"{during - before} threads for {AGENTS} agents"
    assert codes == [-signal.SIGKILL] * AGENTS  # each exit heard, through its pidfd


@pytest.mark.anyio
async def test_the_watcher_is_installed_only_where_asyncio_lacks_it() -> None:
    """Python 3.11 gets the pidfd watcher from the daemon; 3.12 and later have it already."""
    with pidfd_child_watcher() as installed:
        assert installed is (sys.version_info < (3, 12))
