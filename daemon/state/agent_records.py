"""The record of running agents in the state dir, and what a restart does with what it finds.

One JSON file per running agent under `<state dir>/agents/`: task id, backend, pid, process
group, start time and boot id. It is written when an attempt starts (once before the spawn, so
even a crash in between leaves the task id for the tag sweep, once with the pid after it) and
removed when the attempt has ended and its tree was killed. A file still there at start-up is
the leftover of a crash: `recover` kills what the record proves is ours — the recorded process
only if its start time still matches, its descendants, and every process carrying the task's
tracking tag — and never a pid that now belongs to someone else.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import anyio

from backends.process import ProcIdentity, boot_id, group_of, identify, sweep
from daemon.files.private import ensure_dir, path_part, write_atomic
from daemon.logs import short_id
from daemon.times import utc_iso

log = logging.getLogger(__name__)

_WRITE_BOUND = 5.0


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """One running agent as the state dir remembers it: enough to find and verify its tree."""

    task_id: str
    backend: str
    pid: int = 0
    """0 until the process has started."""
    pgid: int = 0
    start_time: int = 0
    """Clock ticks since boot (`/proc/PID/stat` field 22); 0 when unknown."""
    boot_id: str = ""
    started_at: str = field(default_factory=utc_iso)

    def identity(self, current_boot: str) -> ProcIdentity | None:
        """The recorded process, if the record can prove which one it was in this boot."""
        if self.pid <= 1 or self.start_time <= 0 or not self.boot_id:
            return None
        if self.boot_id != current_boot:
            return None
        return ProcIdentity(self.pid, self.start_time)


class AgentRecords:
    """The `agents/` directory of the state dir: one record file per running agent."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def put(self, record: AgentRecord) -> None:
        """Store `record` atomically, replacing the task's earlier one; errors are logged."""
        path = self._path(record.task_id)
        try:
            ensure_dir(self.directory)
            # Not durable: the record must survive the daemon's crash, not the machine's, and
            # after a reboot the processes it names are gone anyway.
            write_atomic(path, json.dumps(asdict(record)), durable=False)
        except OSError as exc:
            log.error("agent record for task %s not written: %s", short_id(record.task_id), exc)

    def remove(self, task_id: str) -> None:
        """Forget the task's record (a missing one is fine); errors are logged."""
        try:
            self._path(task_id).unlink(missing_ok=True)
        except OSError as exc:
            log.error("agent record for task %s not removed: %s", short_id(task_id), exc)

    def records(self) -> list[AgentRecord]:
        """Every readable record; an unreadable file is logged and skipped, never raised."""
        found: list[AgentRecord] = []
        for path in self._files():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                found.append(_parse(data))
            except (OSError, ValueError, TypeError, KeyError) as exc:
                log.warning("agent record %s unreadable, skipped: %s", path.name, exc)
        return found

    async def starting(self, task_id: str, backend: str) -> None:
        """Record an attempt about to spawn its agent (no pid yet: the tag still finds it)."""
        record = AgentRecord(task_id, backend, boot_id=boot_id())
        await anyio.to_thread.run_sync(self.put, record)

    async def running(self, task_id: str, backend: str, pid: int) -> None:
        """Record the spawned agent's pid, group and start time."""
        await anyio.to_thread.run_sync(self._put_running, task_id, backend, pid)

    async def ended(self, task_id: str) -> None:
        """Forget the attempt once its tree is killed; cancellation cannot skip this."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(_WRITE_BOUND):
            await anyio.to_thread.run_sync(self.remove, task_id)

    async def recover(self, grace: float) -> dict[str, list[int]]:
        """Kill what a previous daemon left running; returns the pids killed per task id.

        Records are swept concurrently, each within `grace` plus the SIGKILL wait; the whole
        is bounded. A record is removed once its leftovers are gone.
        """
        records = self.records()
        killed: dict[str, list[int]] = {}
        if not records:
            return killed
        log.info("crash recovery: %d agent record(s) from a previous run", len(records))
        current_boot = boot_id()
        with anyio.move_on_after(grace + 10.0):
            async with anyio.create_task_group() as tg:
                for record in records:
                    tg.start_soon(self._recover_one, record, current_boot, grace, killed)
        total = sum(len(pids) for pids in killed.values())
        log.info(
            "crash recovery: %d of %d record(s) settled, %d leftover process(es) killed",
            len(killed),
            len(records),
            total,
        )
        return killed

    async def _recover_one(
        self, record: AgentRecord, current_boot: str, grace: float, killed: dict[str, list[int]]
    ) -> None:
        pids, survivors = await sweep(record.identity(current_boot), record.task_id, grace)
        task = short_id(record.task_id)
        if survivors:
            log.error(
                "task %s: %d leftover process(es) survived SIGKILL, record kept: pids %s",
                task,
                len(survivors),
                survivors,
            )
            return
        if pids:
            log.warning(
                "task %s: killed %d leftover process(es) of backend %s (recorded pid %d): pids %s",
                task,
                len(pids),
                record.backend,
                record.pid,
                pids,
            )
        else:
            log.info("task %s: nothing of backend %s left running", task, record.backend)
        killed[record.task_id] = pids
        await anyio.to_thread.run_sync(self.remove, record.task_id)

    def _put_running(self, task_id: str, backend: str, pid: int) -> None:
        leader = identify(pid)
        pgid = (group_of(leader) if leader else None) or 0
        start_time = leader.start_time if leader else 0
        self.put(AgentRecord(task_id, backend, pid, pgid, start_time, boot_id()))

    def _files(self) -> Iterator[Path]:
        try:
            yield from sorted(self.directory.glob("*.json"))
        except OSError as exc:
            log.warning("agent records in %s unreadable: %s", self.directory, exc)

    def _path(self, task_id: str) -> Path:
        # Task ids come from the server: keep them from naming a path outside the directory.
        return self.directory / f"{path_part(task_id)}.json"


def _parse(data: object) -> AgentRecord:
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    task_id, backend = data["task_id"], data.get("backend", "")
    if not isinstance(task_id, str) or not task_id or not isinstance(backend, str):
        raise ValueError("task_id must be a non-empty string and backend a string")
    numbers = {k: data.get(k, 0) for k in ("pid", "pgid", "start_time")}
    if not all(type(v) is int and v >= 0 for v in numbers.values()):
        raise ValueError("pid, pgid and start_time must be non-negative integers")
    return AgentRecord(
        task_id,
        backend,
        numbers["pid"],
        numbers["pgid"],
        numbers["start_time"],
        str(data.get("boot_id", "")),
        str(data.get("started_at", "")),
    )
