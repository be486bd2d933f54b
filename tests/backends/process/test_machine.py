"""The whole-machine scan that stopping a run reads: shared by runs stopped together, read
off the event loop, never older than the call."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from backends.process import ProcessRegistry, identify
from backends.process.machine import MachineScan, SharedScans, machine_scan
from backends.process.tree import ProcessTable
from daemon.testing import python, wait_for

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux only")

TAG = "MACHINE_TEST_TAG"
NO_SUCH_PID = 4_000_000_000
"""A pid no process has: a run registered under it has no leader, only its tag."""


def empty(tag_var: str) -> MachineScan:
    return MachineScan(ProcessTable([]), {})


class Counted:
    """A scan that counts its calls and records the thread each ran in."""

    def __init__(self) -> None:
        self.calls = 0
        self.threads: set[int] = set()

    def __call__(self, tag_var: str) -> MachineScan:
        self.calls += 1
        self.threads.add(threading.get_ident())
        return empty(tag_var)


def registry_of(runs: int, scans: SharedScans) -> tuple[ProcessRegistry, list[int]]:
    registry = ProcessRegistry(machine=scans)
    pids = [NO_SUCH_PID + i for i in range(runs)]
    for pid in pids:
        registry.spawned(f"run-{pid}", pid, Path("/"))
    return registry, pids


@pytest.mark.anyio
async def test_runs_stopped_together_share_a_scan_and_a_later_call_gets_a_new_one() -> None:
    """Fifty runs collected at once read the machine once or twice between them (the first
    caller's scan may begin before the others ask), off the event loop's thread; a call
    after they are done reads it again."""
    counted = Counted()
    registry, pids = registry_of(50, SharedScans(counted))
    async with anyio.create_task_group() as tg:
        for pid in pids:
            tg.start_soon(registry.collect, pid, TAG)
    assert 1 <= counted.calls <= 2
    assert threading.get_ident() not in counted.threads
    before = counted.calls
    await registry.collect(pids[0], TAG)
    assert counted.calls == before + 1


@pytest.mark.anyio
async def test_the_event_loop_runs_while_the_machine_is_read() -> None:
    """The scan waits for the event loop to tell it to finish: read on the loop's thread it
    could never be told, and would give up."""
    started, release = threading.Event(), threading.Event()
    told: list[bool] = []

    def waits_for_the_loop(tag_var: str) -> MachineScan:
        started.set()
        told.append(release.wait(timeout=30))
        return empty(tag_var)

    registry, (pid,) = registry_of(1, SharedScans(waits_for_the_loop))
    async with anyio.create_task_group() as tg:
        tg.start_soon(registry.collect, pid, TAG)
        await wait_for(started.is_set, what="the scan to begin", within=40)
        release.set()
    assert told == [True]


def test_a_tagged_process_is_found_and_known_by_its_identity() -> None:
    """A real child carrying the tag is found under its value, and not under another."""
    value = secrets.token_hex(4)
    env = {**os.environ, TAG: value}
    child = subprocess.Popen(
        python("import sys; print('up', flush=True); sys.stdin.read()"),
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        # Popen returns as the exec closes its descriptors, before the kernel has recorded
        # where the new environment lies: read then, /proc/PID/environ is empty.
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        identity = identify(child.pid)
        scan = machine_scan(TAG)
        assert scan.tagged(value) == (identity,)
        assert scan.tagged("another") == () and scan.tagged("") == ()
        assert identity in scan.table.descendants([os.getpid()])
    finally:
        child.kill()
        child.wait()
        child.stdin.close()  # type: ignore[union-attr]
        child.stdout.close()  # type: ignore[union-attr]
