"""Tests for the process registry as a child subreaper: reaping and attributing orphans.

Each scenario runs in a fresh interpreter, which may become a subreaper without changing the
test process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio

from backends.process import ProcessRegistry, ProcIdentity, identify, signal_group_of
from backends.process.tree import ProcessTable, ProcStat, subtree_table
from backends.process.tree_reader import INLINE_COST, WALK_FILE_COST, TreeReader
from daemon.testing import python
from tests.backends.support import TREE_CHILD, identities, tree_pids
from tests.helpers import eventually
from tests.task_steps import TaskSteps

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="subreapers are Linux only")

REPO = Path(__file__).resolve().parents[3]


def run_scenario(code: str, *args: str) -> dict[str, Any]:
    """Run `code` in a fresh interpreter (free to become a subreaper); its JSON report."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


SUBREAPER_SCENARIO = """
import json, subprocess, sys, time
from pathlib import Path
from backends.process import ProcessRegistry

def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]

registry = ProcessRegistry()
assert registry.adopt_orphans()
# Our own agent-like child (its own session) and a helper in our session, both exiting.
own = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"], start_new_session=True)
registry.spawned("own", own.pid, Path("."))
helper = subprocess.Popen([sys.executable, "-c", "raise SystemExit(5)"])
# A middle process leaves an orphan in its own session behind; we adopt it.
orphan_code = "import time; time.sleep(0.2)"
middle = subprocess.Popen(
    [sys.executable, "-c", "import subprocess, sys; print(subprocess.Popen("
     f"[sys.executable, '-c', {orphan_code!r}], start_new_session=True).pid)"],
    stdout=subprocess.PIPE,
)
orphan = int(middle.stdout.read())
middle.wait()
deadline = time.monotonic() + 30
while any(state(p) != "Z" for p in (own.pid, helper.pid, orphan)):
    assert time.monotonic() < deadline, "children never exited"
    time.sleep(0.01)
reaped = registry.reap()
print(json.dumps({"orphan": orphan, "reaped": reaped, "own": own.wait(), "helper": helper.wait()}))
"""


def test_reap_reaps_only_adopted_orphans() -> None:
    """As a subreaper, only the adopted orphan is reaped; our own children keep their status."""
    report = run_scenario(SUBREAPER_SCENARIO)
    assert report["reaped"] == [report["orphan"]]
    assert report["own"] == 7
    assert report["helper"] == 5


ATTRIBUTION_SCENARIO = """
import json, sys
from pathlib import Path
import anyio
from backends.process import ProcessRegistry, ProcessSpec, identify, is_alive, run_process
from tests.backends.support import LinesParser

# An agent whose tool shell detaches a clean-environment sleeper and exits at once.
AGENT = (
    "import subprocess, sys;"
    "subprocess.run(['sh', '-c', 'env -i setsid sleep 333 & echo $!']);"
    "sys.stdin.read()"
)

async def main():
    registry = ProcessRegistry()
    assert registry.adopt_orphans()
    dirs = [Path(sys.argv[1], name) for name in ("a", "b")]
    specs = [
        ProcessSpec([sys.executable, "-c", AGENT], d, {"PATH": "/usr/bin:/bin"},
                    keep_stdin_open=True, kill_grace=2.0, processes=registry)
        for d in dirs
    ]
    for d in dirs:
        d.mkdir()
    async with run_process(specs[1], LinesParser()) as b:
        b_sleeper = identify(int((await anext(aiter(b.messages()))).content))
        async with run_process(specs[0], LinesParser()) as a:
            a_sleeper = identify(int((await anext(aiter(a.messages()))).content))
        after_a = [is_alive(a_sleeper), is_alive(b_sleeper)]
    after_b = [is_alive(a_sleeper), is_alive(b_sleeper)]
    print(json.dumps({"after_a": after_a, "after_b": after_b}))

anyio.run(main)
"""


def test_an_adopted_orphan_dies_with_its_own_run_only(tmp_path: Path) -> None:
    """As subreaper, a detached sleeper dies when its run ends; another run's sleeper lives on."""
    report = run_scenario(ATTRIBUTION_SCENARIO, str(tmp_path))
    assert report == {"after_a": [False, True], "after_b": [False, False]}


@pytest.mark.anyio
async def test_runs_tracked_at_once_share_one_scan() -> None:
    """Fifty runs' trackers read /proc once a tick between them, not once each."""
    scans = 0

    def counted(roots: list[ProcIdentity], agents: frozenset[int]) -> ProcessTable:
        nonlocal scans
        scans += 1
        return subtree_table(roots, agents)

    registry = ProcessRegistry(scanner=counted)
    interval = 0.2
    async with anyio.create_task_group() as tg:
        began = anyio.current_time()
        for _ in range(50):
            tg.start_soon(registry.track, interval)
        await anyio.sleep(2.5 * interval)
        # The ticks the trackers woke on: the multiples of the interval that passed.
        ticks = int(anyio.current_time() / interval) - int(began / interval)
        tg.cancel_scope.cancel()
    assert 1 <= scans <= ticks


async def _tracked_for(instrument: TaskSteps, runs: int, interval: float, ticks: int) -> int:
    """Track `runs` runs for about `ticks` intervals; the ticks that passed while counted."""
    registry = ProcessRegistry(scanner=lambda roots, agents: subtree_table([]))
    async with anyio.create_task_group() as tg:
        for _ in range(runs):
            tg.start_soon(registry.track, interval)
        await anyio.sleep(2 * interval)  # every tracker started and parked
        began = anyio.current_time()
        trio.lowlevel.add_instrument(instrument)
        await anyio.sleep(ticks * interval)
        trio.lowlevel.remove_instrument(instrument)
        passed = int((anyio.current_time() - began) / interval) + 1
        tg.cancel_scope.cancel()
    return passed


def test_runs_tracked_at_once_wake_once_a_tick_between_them() -> None:
    """Fifty runs tracked together: on each tick one tracker wakes and walks for all of them,
    the other forty-nine stay parked (each of them waking took 50 task steps a tick)."""
    steps = TaskSteps()
    ticks = anyio.run(_tracked_for, steps, 50, 0.05, 10, backend="trio")
    assert steps.steps <= 5 * ticks  # the walker's sleep and thread, and this test's own


async def _hand_over(registry: ProcessRegistry, done: Callable[[], bool]) -> None:
    """A first tracker walks, its run ends before any walk; a second run's tracker goes on."""
    async with anyio.create_task_group() as tg:
        first = anyio.CancelScope()

        async def first_tracker() -> None:
            with first:
                await registry.track(0.05)  # a run the test never asks about

        tg.start_soon(first_tracker)
        await anyio.sleep(0.01)
        tg.start_soon(registry.track, 0.05)
        await anyio.sleep(0.01)
        first.cancel()
        await eventually(done, 10.0)
        tg.cancel_scope.cancel()


def test_when_the_walking_run_ends_another_run_walks_on(tmp_path: Path) -> None:
    """The tracker that walks for every run leaves with its run; the next one takes over and
    the remaining run's processes are still recorded."""
    agent = subprocess.Popen(python(TREE_CHILD), stdout=subprocess.PIPE, text=True)
    tree: list[ProcIdentity] = []
    try:
        tree = identities(tree_pids(agent.stdout.readline()))  # type: ignore[union-attr]
        registry = ProcessRegistry()
        registry.spawned("run", agent.pid, tmp_path)
        anyio.run(_hand_over, registry, lambda: set(tree) <= set(registry.members(agent.pid)))
    finally:
        for identity in tree:
            signal_group_of(identity, signal.SIGKILL)
        agent.kill()
        agent.wait()
        agent.stdout.close()  # type: ignore[union-attr]


async def track_until(
    registry: ProcessRegistry, pid: int, done: Callable[[], bool], within: float = 10.0
) -> None:
    """Track agent `pid` every 50 ms until `done()`; fail after `within` seconds."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(registry.track, 0.05)
        await eventually(done, within)
        tg.cancel_scope.cancel()


def test_a_member_whose_pid_was_reused_lends_the_run_nothing(tmp_path: Path) -> None:
    """A member seen before whose pid now names another process is not walked: that process's
    children are not recorded as the run's (and so never killed with it), while the agent's
    own tree is."""
    procs = [
        subprocess.Popen(python(TREE_CHILD), stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    stranger, agent = procs
    trees: list[list[ProcIdentity]] = []
    try:
        trees = [identities(tree_pids(p.stdout.readline())) for p in procs]  # type: ignore[union-attr]
        strangers_tree, agents_tree = trees
        registry = ProcessRegistry()
        registry.spawned("run", agent.pid, tmp_path)
        live = identify(stranger.pid)
        assert live is not None
        # The run once had a member with this pid, started at another time: the stranger is
        # a later process handed the same pid (a reuse cannot be forced, so it is planted).
        earlier = ProcIdentity(stranger.pid, live.start_time - 1)
        registry._runs[agent.pid].members[stranger.pid] = earlier
        members = partial(registry.members, agent.pid)
        anyio.run(track_until, registry, agent.pid, lambda: set(agents_tree) <= set(members()))
        assert not set(members()) & set(strangers_tree)
    finally:
        for identity in (p for tree in trees for p in tree):
            signal_group_of(identity, signal.SIGKILL)
        for proc in procs:
            proc.kill()
            proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]


TOOL_THAT_ENDS = """
import subprocess, sys
tool = subprocess.Popen(["sleep", "60"])
print(tool.pid, flush=True)
sys.stdin.readline()
tool.kill()
tool.wait()
print("gone", flush=True)
sys.stdin.readline()
"""


def test_members_that_exit_are_forgotten(tmp_path: Path) -> None:
    """A member seen once and then exited leaves the run's members, so the walks of a long run
    full of short tool processes read only what is still alive."""
    agent = subprocess.Popen(
        python(TOOL_THAT_ENDS), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert agent.stdin is not None and agent.stdout is not None
    try:
        tool = identities([int(agent.stdout.readline())])[0]
        registry = ProcessRegistry()
        registry.spawned("run", agent.pid, tmp_path)
        anyio.run(track_until, registry, agent.pid, lambda: tool in registry.members(agent.pid))
        agent.stdin.write("\n")
        agent.stdin.flush()
        assert agent.stdout.readline().strip() == "gone"
        anyio.run(track_until, registry, agent.pid, lambda: tool not in registry.members(agent.pid))
    finally:
        agent.kill()
        agent.wait()
        agent.stdin.close()
        agent.stdout.close()


class _Machine:
    """A walk reading `files` children files and a machine of 2,000 processes, each read
    noting whether it ran on the event loop's thread."""

    def __init__(self) -> None:
        self.files = 1
        self.reads: list[tuple[str, bool]] = []

    def walk(self, roots: list[ProcIdentity], agents: frozenset[int]) -> ProcessTable:
        self.reads.append(("walk", threading.current_thread() is threading.main_thread()))
        return ProcessTable([], roots, reads=self.files)

    def whole(self) -> ProcessTable:
        self.reads.append(("whole", threading.current_thread() is threading.main_thread()))
        return ProcessTable([ProcStat(100 + n, "S", 1, 1, 1, 1, 1) for n in range(2000)])


@pytest.mark.anyio
async def test_a_cheap_walk_runs_on_the_event_loop_a_costly_one_in_a_thread() -> None:
    """Reads whose cost is unknown (the first walk, the first whole read) and walks expected
    past `INLINE_COST` go to a worker thread; a walk of a few files runs on the loop."""
    machine = _Machine()
    registry = ProcessRegistry(scanner=TreeReader(machine.walk, machine.whole))
    async with anyio.create_task_group() as tg:
        tg.start_soon(registry.track, 0.02)
        await eventually(lambda: len(machine.reads) >= 4)
        machine.files = INLINE_COST // WALK_FILE_COST + 1
        seen = len(machine.reads)
        await eventually(lambda: len(machine.reads) >= seen + 3)
        tg.cancel_scope.cancel()
    assert machine.reads[:4] == [("walk", False), ("whole", False), ("walk", True), ("walk", True)]
    assert machine.reads[-1] == ("walk", False)
