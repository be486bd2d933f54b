"""The record of running agents: files in the state dir, and recovery from what they name."""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from backends.process import (
    TRACKING_ENV,
    ProcIdentity,
    boot_id,
    identify,
    is_alive,
    signal_group_of,
)
from daemon.state.agent_records import AgentRecord, AgentRecords
from daemon.testing import python
from tests.backends.support import SLEEPER, TREE_CHILD, tree_pids
from tests.helpers import eventually, serving_daemon

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux only")


def a_record(task_id: str = "task-1", **fields: Any) -> AgentRecord:
    base = AgentRecord(task_id, "scripted", 4242, 4242, 987654, "boot-1", "2026-01-02T03:04:05Z")
    return replace(base, **fields)


@pytest.fixture
def store(tmp_path: Path) -> AgentRecords:
    return AgentRecords(tmp_path / "state" / "agents")


class Processes:
    """Processes a test starts; whatever is left of them (and their groups) is killed after."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        self.extra: list[ProcIdentity] = []

    def start(self, code: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            python(code), env=env, start_new_session=True, stdout=subprocess.PIPE, text=True
        )
        self.procs.append(proc)
        return proc

    def cleanup(self) -> None:
        for identity in self.extra:
            signal_group_of(identity, signal.SIGKILL)
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            assert proc.stdout is not None
            proc.stdout.close()


@pytest.fixture
def processes() -> Iterator[Processes]:
    started = Processes()
    try:
        yield started
    finally:
        started.cleanup()


def test_a_record_reads_back_as_written(store: AgentRecords) -> None:
    """Every field of a stored record comes back from `records()`."""
    record = a_record()
    store.put(record)
    assert store.records() == [record]
    stored = json.loads((store.directory / "task-1.json").read_text())
    assert stored["pid"] == 4242 and stored["start_time"] == 987654


def test_a_second_put_replaces_the_task_record(store: AgentRecords) -> None:
    """One file per task: the record written with the pid replaces the one written before."""
    store.put(a_record(pid=0, pgid=0, start_time=0))
    store.put(a_record(pid=77))
    assert [r.pid for r in store.records()] == [77]
    assert [p.name for p in store.directory.iterdir()] == ["task-1.json"]


def test_remove_forgets_the_record_and_tolerates_a_missing_one(store: AgentRecords) -> None:
    """Removing drops the task's file; removing it again is not an error."""
    store.put(a_record("a"))
    store.put(a_record("b"))
    store.remove("a")
    store.remove("a")
    assert [r.task_id for r in store.records()] == ["b"]


def test_a_reader_never_sees_a_partial_record(store: AgentRecords) -> None:
    """While one thread rewrites a record 400 times, a reader always finds it whole."""
    store.put(a_record(pid=1))
    stop = threading.Event()

    def rewrite() -> None:
        for i in range(400):
            store.put(a_record(pid=i + 2, backend="x" * (i % 50)))
        stop.set()

    writer = threading.Thread(target=rewrite)
    writer.start()
    reads = 0
    try:
        while not stop.is_set():
            seen = store.records()
            assert len(seen) == 1 and seen[0].task_id == "task-1", seen
            reads += 1
    finally:
        writer.join(timeout=30)
    assert reads > 0
    assert store.records()[0].pid == 401


def test_a_write_interrupted_before_its_rename_leaves_no_record(
    store: AgentRecords, caplog: pytest.LogCaptureFixture
) -> None:
    """A temporary file left by a crash mid-write is not a record, and is not complained about."""
    store.directory.mkdir(parents=True)
    (store.directory / "task-1.json.tmp").write_text('{"task_id": "task-1", "pi')
    assert store.records() == []
    assert caplog.records == []


def test_unreadable_files_are_skipped_with_a_log(
    store: AgentRecords, caplog: pytest.LogCaptureFixture
) -> None:
    """Broken, foreign or invalid files are each logged by name and skipped; good ones load."""
    store.put(a_record("good"))
    bad = {
        "truncated.json": b'{"task_id": "t", "pid": 1',
        "array.json": b"[1, 2]",
        "no-task.json": b'{"pid": 5}',
        "empty-task.json": b'{"task_id": ""}',
        "negative.json": b'{"task_id": "t", "pid": -3}',
        "text-pid.json": b'{"task_id": "t", "pid": "12"}',
        "bool-pid.json": b'{"task_id": "t", "pid": true}',
        "binary.json": b"\xff\xfe\x00garbage",
    }
    for name, data in bad.items():
        (store.directory / name).write_bytes(data)
    (store.directory / "folder.json").mkdir()
    with caplog.at_level(logging.WARNING, logger="daemon.state.agent_records"):
        found = store.records()
    assert [r.task_id for r in found] == ["good"]
    logged = " ".join(r.getMessage() for r in caplog.records)
    for name in [*bad, "folder.json"]:
        assert f"agent record {name} unreadable" in logged
    assert len(caplog.records) == len(bad) + 1


def test_a_task_id_cannot_name_a_path_outside_the_directory(store: AgentRecords) -> None:
    """Task ids come from the server: `../x` stays a file inside `agents/`, id intact."""
    store.put(a_record("../../escape"))
    assert [p.parent for p in store.directory.iterdir()] == [store.directory]
    assert [r.task_id for r in store.records()] == ["../../escape"]
    store.remove("../../escape")
    assert store.records() == []


def test_ids_differing_only_in_unsafe_characters_keep_their_own_records(
    store: AgentRecords,
) -> None:
    """`a.b` and `a_b` are two running agents: one record must not replace the other."""
    store.put(a_record("a.b", pid=1))
    store.put(a_record("a_b", pid=2))
    assert sorted((r.task_id, r.pid) for r in store.records()) == [("a.b", 1), ("a_b", 2)]


def test_a_failed_write_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state dir that cannot hold the record costs a log line, never the task."""
    blocker = tmp_path / "agents"
    blocker.write_text("a file where the directory should be")
    store = AgentRecords(blocker)
    store.put(a_record())
    store.remove("task-1")
    messages = [r.getMessage() for r in caplog.records]
    assert any("agent record for task task1 not written" in m for m in messages)
    assert store.records() == []


def test_record_identity_is_trusted_only_within_its_boot() -> None:
    """Pid and start time identify a process only in the boot that recorded them."""
    record = a_record(pid=300, start_time=55, boot_id="boot-A")
    assert record.identity("boot-A") == ProcIdentity(300, 55)
    assert record.identity("boot-B") is None
    assert replace(record, start_time=0).identity("boot-A") is None
    assert replace(record, pid=0).identity("boot-A") is None
    assert replace(record, boot_id="").identity("") is None


@linux_only
@pytest.mark.anyio
async def test_running_records_pid_group_and_start_time(
    store: AgentRecords, processes: Processes
) -> None:
    """The record of a started agent carries its pid, its group and its start time."""
    proc = processes.start(SLEEPER)
    await store.starting("task-1", "scripted")
    assert store.records()[0].pid == 0
    await store.running("task-1", "scripted", proc.pid)
    identity = identify(proc.pid)
    assert identity is not None
    [record] = store.records()
    assert (record.pid, record.pgid, record.start_time) == (proc.pid, proc.pid, identity.start_time)
    assert record.boot_id == boot_id() != ""
    await store.ended("task-1")
    assert store.records() == []


@linux_only
@pytest.mark.anyio
async def test_recover_kills_the_recorded_tree_and_removes_the_record(
    store: AgentRecords, processes: Processes
) -> None:
    """A live recorded agent, its own-session grandchild and the chain below are all killed."""
    task_id = f"task-{secrets.token_hex(4)}"
    proc = processes.start(TREE_CHILD, env={**os.environ, TRACKING_ENV: task_id})
    assert proc.stdout is not None
    pids = [proc.pid, *tree_pids(proc.stdout.readline())]
    tree = [i for i in map(identify, pids) if i is not None]
    processes.extra += tree
    assert len(tree) == 3
    await store.running(task_id, "scripted", proc.pid)

    killed = await store.recover(grace=1.0)

    assert killed == {task_id: sorted(pids)}
    assert [t.pid for t in tree if is_alive(t)] == []
    assert store.records() == []


@linux_only
@pytest.mark.anyio
async def test_recover_kills_a_descendant_that_dropped_the_tag(
    store: AgentRecords, processes: Processes
) -> None:
    """A child started with a scrubbed environment is still found below the recorded leader."""
    task_id = f"task-{secrets.token_hex(4)}"
    leader_code = (
        "import subprocess, sys, time\n"
        f"c = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], env={{}})\n"
        "print(c.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = processes.start(leader_code, env={**os.environ, TRACKING_ENV: task_id})
    assert proc.stdout is not None
    child = identify(int(proc.stdout.readline()))
    assert child is not None
    processes.extra.append(child)
    await store.running(task_id, "scripted", proc.pid)

    killed = await store.recover(grace=1.0)

    assert killed == {task_id: sorted([proc.pid, child.pid])}
    assert not is_alive(child)


@linux_only
@pytest.mark.anyio
async def test_recover_leaves_a_reused_pid_alone(
    store: AgentRecords, processes: Processes, caplog: pytest.LogCaptureFixture
) -> None:
    """A record whose pid now belongs to an untagged process with another start time spares it."""
    stranger = processes.start(SLEEPER)
    identity = identify(stranger.pid)
    assert identity is not None
    record = AgentRecord(
        f"task-{secrets.token_hex(4)}",
        "scripted",
        stranger.pid,
        stranger.pid,
        identity.start_time - 1,
        boot_id(),
    )
    store.put(record)
    with caplog.at_level(logging.INFO, logger="daemon.state.agent_records"):
        killed = await store.recover(grace=0.5)
    assert killed == {record.task_id: []}
    assert is_alive(identity) and stranger.poll() is None
    assert store.records() == []
    assert any("nothing of backend scripted left running" in r.getMessage() for r in caplog.records)


@linux_only
@pytest.mark.anyio
async def test_recover_does_not_trust_a_pid_from_another_boot(
    store: AgentRecords, processes: Processes
) -> None:
    """Right pid and start time but another boot id: the untagged process is left alone."""
    stranger = processes.start(SLEEPER)
    identity = identify(stranger.pid)
    assert identity is not None
    fields = asdict(a_record(pid=stranger.pid, pgid=stranger.pid, start_time=identity.start_time))
    store.put(AgentRecord(**{**fields, "boot_id": "a-previous-boot"}))
    assert await store.recover(grace=0.5) == {"task-1": []}
    assert is_alive(identity)


@linux_only
@pytest.mark.anyio
async def test_a_run_is_recorded_while_it_lasts_and_forgotten_after_its_kill(
    tmp_path: Path,
) -> None:
    """A daemon's running agent has a record with its pid; once it is stopped, none is left."""
    script = {"steps": [{"text": "working"}, {"hang": True}]}
    records = AgentRecords(tmp_path / "state" / "agents")
    async with serving_daemon(tmp_path, MULTICA_AGENT_IDLE_WATCHDOG="1s") as d:
        task_id = await d.submit(script)
        await eventually(lambda: [r.pid for r in records.records()] not in ([], [0]))
        [record] = records.records()
        assert record.task_id == task_id and identify(record.pid) is not None
        task = await d.wait(task_id)
        left = records.records()
    assert task["failure_reason"] == "idle_watchdog"
    assert left == []
