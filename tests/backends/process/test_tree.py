"""Tests for finding and sweeping process trees, on real processes."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backends.process import (
    ProcIdentity,
    descendants,
    identify,
    is_alive,
    signal_group_of,
    sweep,
    tagged,
)
from backends.process import kill as kill_module
from backends.process import tree as tree_module
from backends.process.tree import process_table, subtree_table
from daemon.testing import python, survivors
from tests.backends.support import PINGABLE, SLEEPER, TREE_CHILD, identities, tree_pids

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux only")


@pytest.fixture
def tag_var() -> str:
    """A tracking variable no other test (or process) uses."""
    return f"PROCTREE_TEST_{secrets.token_hex(4).upper()}"


class Children:
    """Python children started by a test (text pipes), killed with their trees afterwards."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[str]] = []
        self._extra: list[ProcIdentity] = []

    def start(self, code: str = SLEEPER, **kwargs: Any) -> subprocess.Popen[str]:
        kwargs.setdefault("stdout", subprocess.PIPE)
        proc = subprocess.Popen(python(code), text=True, **kwargs)
        self._procs.append(proc)
        return proc

    def also_kill(self, extra: list[ProcIdentity]) -> None:
        self._extra += extra

    def cleanup(self) -> None:
        for identity in self._extra:
            signal_group_of(identity, signal.SIGKILL)
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


@pytest.fixture
def spawn() -> Iterator[Children]:
    """Start children; whatever is left of them is killed after the test."""
    children = Children()
    yield children
    children.cleanup()


def ping(proc: subprocess.Popen[str]) -> str:
    """Send `ping` to a PINGABLE child and return its next line."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("ping\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def pingable(spawn: Children, **kwargs: Any) -> subprocess.Popen[str]:
    proc = spawn.start(PINGABLE, stdin=subprocess.PIPE, **kwargs)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_identify_is_stable_and_none_once_reaped(spawn: Children) -> None:
    """A live process has one identity; once it is reaped, it has none and is not alive."""
    proc = spawn.start()
    first = identify(proc.pid)
    assert first is not None and first == identify(proc.pid) and is_alive(first)
    proc.kill()
    proc.wait()
    assert identify(proc.pid) is None
    assert not is_alive(first)


def test_zombie_counts_as_gone(spawn: Children) -> None:
    """An exited but unreaped child (a zombie) is neither identified nor alive."""
    proc = spawn.start("import sys; sys.stdin.read()", stdin=subprocess.PIPE)
    identity = identify(proc.pid)
    assert identity is not None
    assert proc.stdin is not None
    proc.stdin.close()
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + 10
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "child never exited"
        time.sleep(0.01)
    assert identify(proc.pid) is None
    assert not is_alive(identity)


def test_reused_pid_is_not_alive(spawn: Children) -> None:
    """The same pid with another start time is another process: not alive."""
    proc = spawn.start()
    identity = identify(proc.pid)
    assert identity is not None
    assert not is_alive(ProcIdentity(proc.pid, identity.start_time + 1))


def test_descendants_follow_children_into_other_sessions(spawn: Children) -> None:
    """A grandchild in its own session and its child are both descendants of the child."""
    proc = spawn.start(TREE_CHILD, start_new_session=True)
    assert proc.stdout is not None
    tree = identities(tree_pids(proc.stdout.readline()))
    spawn.also_kill(tree)
    assert os.getsid(tree[0].pid) != os.getsid(proc.pid)
    assert set(tree) <= set(descendants(proc.pid))
    assert descendants(tree[1].pid) == []


THREAD_PARENT = """
import subprocess, sys, threading
def start():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print("tree", child.pid, flush=True)
threading.Thread(target=start).start()
sys.stdin.read()
"""


def test_a_walk_finds_what_a_whole_scan_finds_and_reads_nothing_else(
    spawn: Children, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Walking down from a root finds its grandchildren in other sessions and the children
    its other threads started, and reads no process outside the tree."""
    proc = spawn.start(TREE_CHILD, start_new_session=True)
    threaded = spawn.start(THREAD_PARENT, stdin=subprocess.PIPE)
    assert proc.stdout is not None and threaded.stdout is not None
    tree = identities(tree_pids(proc.stdout.readline()))
    by_thread = identities(tree_pids(threaded.stdout.readline()))
    spawn.also_kill(tree + by_thread)
    roots = identities([proc.pid, threaded.pid])
    read: list[int] = []
    real_read = tree_module._read_stat
    monkeypatch.setattr(tree_module, "_read_stat", lambda pid: read.append(pid) or real_read(pid))

    walk = subtree_table(roots)

    assert set(walk.descendants([proc.pid])) == set(tree)
    assert walk.descendants([threaded.pid]) == by_thread
    assert set(read) <= {p.pid for p in roots + tree + by_thread}
    assert set(walk.descendants([proc.pid])) == set(process_table().descendants([proc.pid]))
    assert all(walk.covers(root) for root in roots)


THREADS_AND_A_CHILD = """
import subprocess, sys, threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print("tree", child.pid, flush=True)
sys.stdin.read()
"""


def test_every_process_read_answers_for_a_tree_as_a_walk_does(spawn: Children) -> None:
    """Read from every process, a table covers a live root and not a pid another process has
    now, finds what a walk finds, and counts the children files that walk read (one a
    thread: four in the root, one in its child)."""
    proc = spawn.start(THREADS_AND_A_CHILD, stdin=subprocess.PIPE)
    assert proc.stdout is not None
    child = identities(tree_pids(proc.stdout.readline()))
    spawn.also_kill(child)
    [root] = identities([proc.pid])
    reused = ProcIdentity(proc.pid, root.start_time + 1)

    whole, walk = process_table(), subtree_table([root])

    assert whole.covers(root) and not whole.covers(reused)
    assert whole.descendants([root.pid]) == walk.descendants([root.pid]) == child
    assert whole.threads_below([root]) == walk.reads == 5
    assert whole.threads_below([reused]) == 0
    proc.kill()
    proc.wait(timeout=10)
    assert not process_table().covers(root)


def test_a_walk_skips_a_root_whose_pid_is_another_process_now(spawn: Children) -> None:
    """A recorded member whose pid was reused is not walked: the new process's children are
    not taken for the run's."""
    proc = spawn.start(TREE_CHILD, start_new_session=True)
    assert proc.stdout is not None
    spawn.also_kill(identities(tree_pids(proc.stdout.readline())))
    live = identities([proc.pid])[0]
    reused = ProcIdentity(proc.pid, live.start_time + 1)

    walk = subtree_table([reused])

    assert not walk.covers(reused)
    assert walk.descendants([proc.pid]) == []


def test_a_walk_asks_whether_an_agent_runs_without_reading_its_stat(
    spawn: Children, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root named as this process's unreaped child is walked on one syscall, not a read of
    its stat; once it exited it is not walked, and its exit status is still there to reap."""
    proc = spawn.start(TREE_CHILD, start_new_session=True)
    assert proc.stdout is not None
    tree = identities(tree_pids(proc.stdout.readline()))
    spawn.also_kill(tree)
    root = identities([proc.pid])
    read: list[int] = []
    real_read = tree_module._read_stat
    monkeypatch.setattr(tree_module, "_read_stat", lambda pid: read.append(pid) or real_read(pid))

    walk = subtree_table(root, frozenset({proc.pid}))

    assert proc.pid not in read
    assert set(walk.descendants([proc.pid])) == set(tree)
    proc.kill()
    wait_for_zombie(proc.pid)
    assert not subtree_table(root, frozenset({proc.pid})).covers(root[0])
    assert proc.wait(timeout=10) == -signal.SIGKILL


def wait_for_zombie(pid: int) -> None:
    deadline = time.monotonic() + 10
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        assert time.monotonic() < deadline, f"{pid} did not exit"
        time.sleep(0.01)


def test_without_children_files_a_walk_is_a_whole_scan(
    spawn: Children, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel without /proc/PID/task/TID/children still finds the tree, by reading all."""
    proc = spawn.start(TREE_CHILD, start_new_session=True)
    assert proc.stdout is not None
    tree = identities(tree_pids(proc.stdout.readline()))
    spawn.also_kill(tree)
    monkeypatch.setattr(tree_module, "_HAVE_CHILDREN", False)

    walk = subtree_table(identities([proc.pid]))

    assert set(tree) <= set(walk.descendants([proc.pid]))


def test_tagged_matches_the_exact_value(spawn: Children, tag_var: str) -> None:
    """Only processes whose tag equals the value are found, not ones sharing a prefix."""
    wanted = spawn.start(env={tag_var: "task-1"})
    spawn.start(env={tag_var: "task-12"})
    spawn.start(env={f"{tag_var}X": "task-1"})
    assert [p.pid for p in tagged(tag_var, "task-1")] == [wanted.pid]
    assert tagged(tag_var, "") == []


def test_signal_group_of_skips_a_reused_pid(spawn: Children) -> None:
    """A pid whose start time no longer matches is not signalled."""
    proc = pingable(spawn, start_new_session=True)
    identity = identify(proc.pid)
    assert identity is not None
    assert not signal_group_of(ProcIdentity(proc.pid, identity.start_time - 1), signal.SIGTERM)
    assert ping(proc) == "ping"


def test_signal_group_of_signals_the_whole_group(spawn: Children) -> None:
    """Every member of the process's group gets the signal."""
    code = """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        print(child.pid, flush=True)
        time.sleep(120)
    """
    proc = spawn.start(code, start_new_session=True)
    assert proc.stdout is not None
    members = identities([proc.pid, int(proc.stdout.readline())])
    spawn.also_kill(members)
    assert signal_group_of(members[0], signal.SIGTERM)
    assert survivors(members, within=10) == []


def test_signal_group_of_never_signals_our_own_group(spawn: Children) -> None:
    """A process in the caller's own group is signalled alone, never through the group."""
    target = pingable(spawn)
    bystander = pingable(spawn)
    identity = identify(target.pid)
    assert identity is not None
    assert signal_group_of(identity, signal.SIGTERM)
    assert target.wait(timeout=10) == 0
    assert ping(bystander) == "ping"


@pytest.mark.anyio
async def test_sweep_spares_a_reused_pid(spawn: Children, tag_var: str) -> None:
    """A record whose pid now belongs to another process (other start time) is left alone."""
    proc = pingable(spawn, start_new_session=True)
    identity = identify(proc.pid)
    assert identity is not None
    stale = ProcIdentity(proc.pid, identity.start_time - 1)
    assert await sweep(stale, "task-gone", 0.1, tag_var=tag_var) == ([], [])
    assert ping(proc) == "ping"


@pytest.mark.anyio
async def test_sweep_kills_a_recorded_tagged_leftover(spawn: Children, tag_var: str) -> None:
    """A recorded leftover carrying the tag is stopped with SIGTERM."""
    proc = spawn.start(env={tag_var: "task-7"}, start_new_session=True)
    record = identify(proc.pid)
    assert record is not None
    assert await sweep(record, "task-7", 5, tag_var=tag_var) == ([proc.pid], [])
    assert proc.wait(timeout=10) == -signal.SIGTERM


@pytest.mark.anyio
async def test_sweep_finds_unrecorded_tagged_processes(spawn: Children, tag_var: str) -> None:
    """A tagged process missing from the records is found by its tag and stopped."""
    code = """
        import time
        print("ready", flush=True)
        time.sleep(120)
    """
    proc = spawn.start(code, env={tag_var: "task-8"}, start_new_session=True)
    # Only once it runs: a child still starting up may not show its environment yet.
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    assert await sweep(None, "task-8", 5, tag_var=tag_var) == ([proc.pid], [])
    assert proc.wait(timeout=10) == -signal.SIGTERM


def _sigterm_ignorer(spawn: Children) -> tuple[subprocess.Popen[str], ProcIdentity]:
    """A child in its own session that ignores SIGTERM, once it runs, and its identity."""
    code = """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(120)
    """
    proc = spawn.start(code, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    record = identify(proc.pid)
    assert record is not None
    return proc, record


@pytest.mark.anyio
async def test_what_outlived_the_grace_is_looked_up_off_the_event_loop(
    spawn: Children, tag_var: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below a process that survived SIGTERM, the machine's process table is read in a worker
    thread: read on the event loop, it would hold every other run while it lasts."""
    proc, record = _sigterm_ignorer(spawn)
    readers: list[int] = []
    real_table = kill_module.process_table
    monkeypatch.setattr(
        kill_module, "process_table", lambda: readers.append(threading.get_ident()) or real_table()
    )

    assert await sweep(record, "", 0.1, tag_var=tag_var) == ([proc.pid], [])

    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert readers and threading.get_ident() not in readers


@pytest.mark.anyio
async def test_sweep_escalates_to_sigkill(spawn: Children, tag_var: str) -> None:
    """A leftover that ignores SIGTERM is killed with SIGKILL after the grace."""
    proc, record = _sigterm_ignorer(spawn)
    started = time.monotonic()
    assert await sweep(record, "", 0.3, tag_var=tag_var) == ([proc.pid], [])
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert time.monotonic() - started >= 0.3
