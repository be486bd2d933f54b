"""The durable outbox: what the server did not take at a task's end, kept on disk until it does.

One JSON file per task under `<state dir>/outbox/`, written atomically (temporary file, fsync,
rename), so a crash mid-write never leaves half a report. A file holds the task's terminal report
(`complete`, `fail` or `cancel_ack`) and whatever of its transcript and usage was still unsent.
Files are re-sent in the background and at the next start until the server answers 2xx or a
permanent 4xx for each part. The parts go in the order the server would have seen them live —
transcript, usage, terminal report — and each is forgotten as soon as it is delivered, so a
re-send never repeats a part the server already took (transcript messages keep their `seq`, and
the server stores each `(task, seq)` once anyway).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

from daemon.errors import PermanentServerError, ServerError
from daemon.files import ensure_dir, safe_name, write_atomic
from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.protocol.models import UsageEntry

log = logging.getLogger(__name__)

MESSAGE_BATCH = 1000
"""Transcript messages per request when the outbox re-sends a task's transcript."""

KINDS = frozenset({"complete", "fail", "cancel_ack", ""})
"""Terminal calls a report may hold; "" once it was delivered and only transcript/usage wait."""


@dataclass(frozen=True, slots=True)
class TerminalReport:
    """A task's `complete`, `fail` or `cancel_ack` call, plus its undelivered transcript and usage.

    `messages` are transcript messages and `usage` usage entries, both in their wire shape.
    """

    task_id: str
    kind: str
    body: dict[str, Any]
    messages: tuple[dict[str, Any], ...] = ()
    usage: tuple[dict[str, Any], ...] = ()

    @property
    def empty(self) -> bool:
        """True when nothing is left to deliver."""
        return not (self.kind or self.messages or self.usage)


class Delivery:
    """Sends one report's parts in order; `left` is always what the server has not yet taken.

    `left` is updated after every part the server accepts (or refuses for good), so a delivery
    cut short by a deadline or cancellation still says exactly what remains for the outbox.
    """

    def __init__(self, report: TerminalReport) -> None:
        self.left = report
        self.error: ServerError | None = None

    async def send(self, client: Any, *, retry: bool = True) -> TerminalReport:
        """Try every part once through `client` (with its retries unless `retry=False`).

        A transient failure of one part does not stop the later ones: a result must not wait
        behind a transcript the server keeps refusing to store.
        """
        task_id = self.left.task_id
        while self.left.messages:
            batch = list(islice(self.left.messages, MESSAGE_BATCH))
            sent = await self._part("transcript", client.send_messages(task_id, batch, retry=retry))
            if sent == "failed":
                break
            rest = self.left.messages[len(batch) :] if sent == "delivered" else ()
            self.left = replace(self.left, messages=rest)
        if self.left.usage:
            entries = [UsageEntry.model_validate(u) for u in self.left.usage]
            usage = await self._part("usage", client.report_usage(task_id, entries, retry=retry))
            if usage != "failed":
                self.left = replace(self.left, usage=())
        if self.left.kind:
            terminal = await self._part(self.left.kind, _terminal(client, self.left, retry))
            if terminal != "failed":
                self.left = replace(self.left, kind="", body={})
        return self.left

    async def _part(self, what: str, call: Awaitable[None]) -> str:
        """`delivered`, `refused` (a permanent 4xx: never sent again) or `failed` (transient)."""
        try:
            await call
        except PermanentServerError as exc:
            log.error("task %s: server refused the %s: %s", short_id(self.left.task_id), what, exc)
            return "refused"
        except ServerError as exc:
            self.error = exc
            return "failed"
        return "delivered"


async def _terminal(client: Any, report: TerminalReport, retry: bool) -> None:
    body = report.body
    if report.kind == "complete":
        await client.complete(report.task_id, retry=retry, **body)
    elif report.kind == "fail":
        await client.fail(report.task_id, retry=retry, **body)
    elif report.kind == "cancel_ack":
        await client.cancel_ack(report.task_id, retry=retry)
    else:
        raise ValueError(f"unknown report kind {report.kind!r}")


class Outbox:
    """Reports waiting for the server, one file per task."""

    def __init__(self, directory: Path, metrics: Metrics) -> None:
        self.directory = directory
        self._metrics = metrics
        ensure_dir(self.directory)
        self._update_depth()

    def put(self, report: TerminalReport) -> None:
        """Store `report` durably, replacing any earlier one for the same task."""
        if report.empty:
            self.remove(report.task_id)
            return
        path = self._path(report.task_id)
        write_atomic(path, json.dumps(asdict(report)))
        self._update_depth()
        log.warning(
            "outbox: kept %s for task %s (%d transcript messages, %d usage entries)",
            report.kind or "transcript",
            short_id(report.task_id),
            len(report.messages),
            len(report.usage),
        )

    def reports(self) -> list[TerminalReport]:
        """Every stored report, oldest first; unreadable files are logged and set aside."""
        found = []
        for path in sorted(self.directory.glob("*.json"), key=_mtime):
            try:
                found.append(_load(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                # Set aside for an operator to look at, out of the depth and the re-sends.
                log.error("outbox: unreadable %s, renamed to .bad: %s", path.name, exc)
                with contextlib.suppress(OSError):
                    path.replace(path.with_suffix(".bad"))
        return found

    def depth(self) -> int:
        """How many tasks have something waiting."""
        return sum(1 for _ in self.directory.glob("*.json"))

    def remove(self, task_id: str) -> None:
        """Forget the report for `task_id` (the server took it, or refused it for good)."""
        self._path(task_id).unlink(missing_ok=True)
        self._update_depth()

    async def flush(self, client: Any) -> int:
        """Try each stored report once; return how many are still waiting."""
        for report in self.reports():
            delivery = Delivery(report)
            try:
                left = await delivery.send(client, retry=False)
            finally:
                # Also when cancelled part-way: what was delivered must not be sent again.
                if delivery.left is not report:
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
        return self.directory / f"{safe_name(task_id)}.json"

    def _update_depth(self) -> None:
        self._metrics.outbox_depth.set(self.depth())


_BODY_KEYS = {
    "complete": {"output", "session_id", "work_dir"},
    "fail": {"error", "failure_reason", "session_id", "work_dir"},
    "cancel_ack": set(),
    "": set(),
}


def _load(text: str) -> TerminalReport:
    """A stored report, checked so a damaged file is a clear error, not a crash at send time."""
    data = json.loads(text)
    kind = data["kind"]
    if kind not in KINDS:
        raise ValueError(f"unknown report kind {kind!r}")
    body = dict(data["body"])
    if not set(body) <= _BODY_KEYS[kind]:
        raise ValueError(f"unexpected fields for {kind or 'a delivered report'}: {sorted(body)}")
    messages = tuple(dict(m) for m in data.get("messages", ()))
    if not all(isinstance(m.get("seq"), int) for m in messages):
        raise ValueError("a transcript message without an integer seq")
    usage = tuple(
        UsageEntry.model_validate(u).model_dump(mode="json") for u in data.get("usage", ())
    )
    return TerminalReport(str(data["task_id"]), kind, body, messages, usage)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed between the listing and now
        return 0.0
