"""The durable outbox: terminal reports the server did not take, kept on disk until it does.

One JSON file per task under `<state dir>/outbox/`, written atomically (temporary file, fsync,
rename), so a crash mid-write never leaves half a report. Reports are re-sent in the background
and at the next start until the server answers 2xx or a permanent 4xx.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from daemon.errors import PermanentServerError, ServerError
from daemon.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TerminalReport:
    """A `complete`, `fail` or `cancel_ack` call for one task, with its body."""

    task_id: str
    kind: str
    body: dict[str, Any]


class Outbox:
    """Terminal reports waiting for the server, one file per task."""

    def __init__(self, directory: Path, metrics: Metrics) -> None:
        self.directory = directory
        self._metrics = metrics
        self.directory.mkdir(parents=True, exist_ok=True)
        self._update_depth()

    def put(self, report: TerminalReport) -> None:
        """Store `report` durably, replacing any earlier one for the same task."""
        path = self._path(report.task_id)
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(asdict(report), fh)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
        self._update_depth()
        log.warning("outbox: kept %s report for task %s", report.kind, report.task_id[:8])

    def reports(self) -> list[TerminalReport]:
        """Every stored report, oldest first; unreadable files are logged and skipped."""
        found = []
        for path in sorted(self.directory.glob("*.json"), key=lambda p: p.stat().st_mtime):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                found.append(TerminalReport(data["task_id"], data["kind"], dict(data["body"])))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("outbox: unreadable %s: %s", path.name, exc)
        return found

    def depth(self) -> int:
        """How many reports wait."""
        return sum(1 for _ in self.directory.glob("*.json"))

    def remove(self, task_id: str) -> None:
        """Forget the report for `task_id` (the server took it, or refused it for good)."""
        self._path(task_id).unlink(missing_ok=True)
        self._update_depth()

    async def flush(self, client: Any) -> int:
        """Try each stored report once; return how many are still waiting."""
        for report in self.reports():
            try:
                await send_report(client, report, retry=False)
            except PermanentServerError as exc:
                log.warning(
                    "outbox: server refused %s for %s: %s", report.kind, report.task_id[:8], exc
                )
            except ServerError as exc:
                log.info(
                    "outbox: %s for %s still not delivered: %s",
                    report.kind,
                    report.task_id[:8],
                    exc,
                )
                continue
            else:
                log.info("outbox: delivered %s for task %s", report.kind, report.task_id[:8])
            self.remove(report.task_id)
        return self.depth()

    def _path(self, task_id: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in task_id)
        return self.directory / f"{safe}.json"

    def _update_depth(self) -> None:
        self._metrics.outbox_depth.set(self.depth())


async def send_report(client: Any, report: TerminalReport, *, retry: bool = True) -> None:
    """Send one terminal report through the client's matching call."""
    body = report.body
    if report.kind == "complete":
        await client.complete(report.task_id, retry=retry, **body)
    elif report.kind == "fail":
        await client.fail(report.task_id, retry=retry, **body)
    elif report.kind == "cancel_ack":
        await client.cancel_ack(report.task_id, retry=retry)
    else:
        raise ValueError(f"unknown report kind {report.kind!r}")
