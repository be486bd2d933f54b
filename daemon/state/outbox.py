"""The durable outbox: what the server did not take at a task's end, kept on disk until it does.

One JSON file per task under `<state dir>/outbox/`, written atomically (temporary file, fsync,
rename), so a crash mid-write never leaves half a report. A file holds the task's terminal report
(`complete`, `fail` or `cancel_ack`) and whatever of its transcript and usage was still unsent.
Files are re-sent in the background and at the next start until the server answers 2xx or a
permanent 4xx for each part. The parts go in the order the server would have seen them live —
transcript, usage, terminal report — and each is forgotten as soon as it is delivered, so a
re-send never repeats a part the server already took (transcript messages keep their `seq`, and
a batch that may have been stored is sent again only to a server that stores each seq once).
A report that cannot be written (a full disk, a read-only file system) is held in memory
instead, counted in the depth, and sent or written at the next round; only a daemon that also
stops before either loses it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from daemon.errors import PermanentServerError
from daemon.files.private import ensure_dir, path_part, write_atomic
from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.protocol.api import TaskServer
from daemon.protocol.batches import batch_end, send_batch, wire_size
from daemon.protocol.reports import TerminalReport, UsageEntry

log = logging.getLogger(__name__)

FORMAT = 2
"""Version of the outbox file. Version 1 (no `format` key) kept the call as `kind` + `body`."""


class Leftover(BaseModel):
    """What of one task's end the server has not taken yet: its terminal report (None once
    delivered), and its undelivered transcript messages (in their wire shape) and usage."""

    # Built when first used, not at start-up: protocol/models.py's WireModel says why.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    format: int = FORMAT
    task_id: str
    report: TerminalReport | None = None
    messages: tuple[dict[str, Any], ...] = ()
    usage: tuple[UsageEntry, ...] = ()

    @field_validator("messages")
    @classmethod
    def _numbered(cls, messages: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        if not all(isinstance(m.get("seq"), int) for m in messages):
            raise ValueError("a transcript message without an integer seq")
        return messages

    @property
    def kind(self) -> str:
        """The terminal call still waiting, or "" when only transcript or usage wait."""
        return self.report.kind if self.report is not None else ""

    @property
    def empty(self) -> bool:
        """True when nothing is left to deliver."""
        return not (self.report or self.messages or self.usage)


class Delivery:
    """Sends one leftover's parts in order; `left` is always what the server has not taken.

    `left` is updated after every part the server accepts (or refuses for good), so a delivery
    cut short by a deadline or cancellation still says exactly what remains for the outbox.
    """

    def __init__(self, leftover: Leftover, metrics: Metrics | None = None) -> None:
        self.left = leftover
        self.error: Exception | None = None
        self._metrics = metrics

    async def send(self, client: TaskServer, *, retry: bool = True) -> Leftover:
        """Try every part once through `client` (with its retries unless `retry=False`).

        A transient failure of one part does not stop the later ones: a result must not wait
        behind a transcript the server keeps refusing to store.
        """
        task_id = self.left.task_id
        while self.left.messages:
            # Sized to fit the server, split where it refuses, never re-sent unconfirmed to a
            # server that does not deduplicate (daemon/protocol/batches.py).
            batch = self.left.messages[: batch_end(map(wire_size, self.left.messages))]
            sent = await send_batch(client, task_id, batch, self._metrics, retry=retry)
            rest = () if sent.gone else self.left.messages[sent.handled :]
            self.left = self.left.model_copy(update={"messages": rest})
            if sent.error is not None:
                self.error = sent.error
                break
        if self.left.usage:
            call = client.report_usage(task_id, self.left.usage, retry=retry)
            if await self._part("usage", call) != "failed":
                self.left = self.left.model_copy(update={"usage": ()})
        if self.left.report is not None:
            call = client.send_report(task_id, self.left.report, retry=retry)
            if await self._part(self.left.report.kind, call) != "failed":
                self.left = self.left.model_copy(update={"report": None})
        return self.left

    async def _part(self, what: str, call: Awaitable[None]) -> str:
        """`delivered`, `refused` (a permanent 4xx: never sent again) or `failed` (transient)."""
        try:
            await call
        except PermanentServerError as exc:
            log.error("task %s: server refused the %s: %s", short_id(self.left.task_id), what, exc)
            return "refused"
        except Exception as exc:
            # A transient ServerError, or a call that raised what it never should (a client
            # defect): either way the part is kept and tried again, never lost with the task.
            self.error = exc
            return "failed"
        return "delivered"


class Outbox:
    """Reports waiting for the server, one file per task — or in memory while none can be
    written (a full disk, a read-only file system), until the server takes them or a write
    succeeds."""

    def __init__(self, directory: Path, metrics: Metrics) -> None:
        self.directory = directory
        self._metrics = metrics
        self._unwritten: dict[str, Leftover] = {}
        ensure_dir(self.directory)
        self._update_depth()

    def put(self, report: Leftover) -> bool:
        """Store `report` durably, replacing any earlier one for the same task; False when the
        write failed and the report is kept in memory instead (it is never raised or lost)."""
        if report.empty:
            self.remove(report.task_id)
            return True
        what, task = report.kind or "transcript", short_id(report.task_id)
        try:
            write_atomic(self._path(report.task_id), report.model_dump_json())
        except OSError as exc:
            self._unwritten[report.task_id] = report
            self._update_depth()
            log.error(
                "outbox: %s for task %s could not be written (%s): kept in memory, retrying",
                what,
                task,
                exc,
            )
            return False
        self._unwritten.pop(report.task_id, None)
        self._update_depth()
        log.warning(
            "outbox: kept %s for task %s (%d transcript messages, %d usage entries)",
            what,
            task,
            len(report.messages),
            len(report.usage),
        )
        return True

    def reports(self) -> list[Leftover]:
        """Every waiting report, oldest file first, then those only in memory (which replace
        an older file of the same task); unreadable files are logged and set aside."""
        found = []
        for path in sorted(self.directory.glob("*.json"), key=_mtime):
            try:
                report = _load(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                # Set aside for an operator to look at, out of the depth and the re-sends.
                log.error("outbox: unreadable %s, renamed to .bad: %s", path.name, exc)
                with contextlib.suppress(OSError):
                    path.replace(path.with_suffix(".bad"))
                continue
            if report.task_id not in self._unwritten:
                found.append(report)
        return found + list(self._unwritten.values())

    def depth(self) -> int:
        """How many tasks have something waiting, on disk or in memory."""
        names = {path.name for path in self.directory.glob("*.json")}
        return len(names | {self._path(task_id).name for task_id in self._unwritten})

    def remove(self, task_id: str) -> None:
        """Forget the report for `task_id` (the server took it, or refused it for good)."""
        self._unwritten.pop(task_id, None)
        self._path(task_id).unlink(missing_ok=True)
        self._update_depth()

    async def flush(self, client: TaskServer) -> int:
        """Try each stored report once; return how many are still waiting."""
        for report in self.reports():
            delivery = Delivery(report, self._metrics)
            try:
                left = await delivery.send(client, retry=False)
            finally:
                # Also when cancelled part-way: what was delivered must not be sent again; and
                # one held in memory is written now if the disk has room again.
                if delivery.left is not report or report.task_id in self._unwritten:
                    self.put(delivery.left)
            if left.empty:
                log.info("outbox: delivered everything for task %s", short_id(report.task_id))
            elif delivery.error is not None:
                log.info(
                    "outbox: %s for %s still not delivered: %s",
                    left.kind or "transcript",
                    short_id(report.task_id),
                    delivery.error,
                )
        return self.depth()

    def _path(self, task_id: str) -> Path:
        return self.directory / f"{path_part(task_id)}.json"

    def _update_depth(self) -> None:
        self._metrics.outbox_depth.set(self.depth())


def _load(text: str) -> Leftover:
    """A stored leftover, checked so a damaged file is a clear error, not a crash at send time."""
    data = json.loads(text)
    if isinstance(data, dict) and "format" not in data:
        data = _from_v1(data)
    return Leftover.model_validate(data)


def _from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version 1 file (`kind` and `body` side by side) in today's shape."""
    kind = data.pop("kind")
    body = data.pop("body")
    data["report"] = {"kind": kind, **body} if kind else None
    data["format"] = 1
    return data


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed between the listing and now
        return 0.0
