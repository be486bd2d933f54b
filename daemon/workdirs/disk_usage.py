"""What the workspaces root holds, per task and per workspace (Go `diskusage.go`).

A read-only scan with no daemon and no server needed: `agent-daemon disk-usage`, the GC's
gauges and `status` all read it. The JSON has the field names of Multica's `DiskUsageReport`,
so a script written for `multica daemon disk-usage --output json` reads this one. Totals are
the whole scan's, never the `--top` view's; the repository caches (`.repos`) are counted apart
from the task directories, and other dot directories (the skill cache) are no workspace.
`parent_status` stays empty: the scan never asks a server.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from daemon.boundary.beneath import opened_dir, stat_at
from daemon.workdirs.gc_meta import GC_META, read_meta
from daemon.workdirs.repo_gc import REPOS_DIR
from daemon.workdirs.sizes import dir_size, subdirs, task_size

UNKNOWN_KIND = "unknown"


@dataclass(frozen=True, slots=True)
class TaskDiskUsage:
    """One task directory."""

    workspace_id: str
    workspace_short: str
    task_short: str
    path: str
    kind: str
    parent_id: str
    parent_status: str
    age_seconds: int
    size_bytes: int
    artifact_size_bytes: int


@dataclass(slots=True)
class WorkspaceDiskUsage:
    """One workspace's task directories together."""

    workspace_id: str
    workspace_short: str
    task_count: int = 0
    size_bytes: int = 0
    artifact_size_bytes: int = 0
    artifact_ratio: float = 0.0
    oldest_age_seconds: int = 0


@dataclass(slots=True)
class DiskUsageReport:
    """The whole root."""

    workspaces_root: str
    generated_at: str
    artifact_patterns: list[str]
    managed_artifact_subpaths: list[str] = field(default_factory=list)
    tasks: list[TaskDiskUsage] = field(default_factory=list)
    workspaces: list[WorkspaceDiskUsage] = field(default_factory=list)
    total_task_count: int = 0
    total_workspace_count: int = 0
    total_size_bytes: int = 0
    total_artifact_size_bytes: int = 0
    total_artifact_ratio: float = 0.0
    repo_cache_size_bytes: int = 0
    repo_cache_count: int = 0

    def as_json(self) -> dict[str, Any]:
        """The report as Multica's JSON."""
        return asdict(self)

    def keep_top(self, top: int, *, by_workspace: bool) -> None:
        """Keep only the `top` largest rows of the view shown (totals unchanged)."""
        if top > 0:
            if by_workspace:
                del self.workspaces[top:]
            else:
                del self.tasks[top:]


def short_id(value: str) -> str:
    """A UUID's first 8 characters without dashes (Go `ShortID`)."""
    return value.replace("-", "")[:8]


def scan(
    root: Path, artifact_names: frozenset[str], now: datetime | None = None
) -> DiskUsageReport:
    """Measure every task directory and repository cache under `root` (missing: empty)."""
    moment = now or datetime.now(UTC)
    report = DiskUsageReport(
        workspaces_root=str(root),
        generated_at=moment.isoformat().replace("+00:00", "Z"),
        artifact_patterns=sorted(artifact_names),
    )
    per_ws: dict[str, WorkspaceDiskUsage] = {}
    for ws_dir in subdirs(root):
        if ws_dir.name == REPOS_DIR:
            for repo in (r for ws in subdirs(ws_dir) for r in subdirs(ws)):
                report.repo_cache_count += 1
                report.repo_cache_size_bytes += dir_size(repo)
            continue
        if ws_dir.name.startswith("."):
            continue
        for task_dir in subdirs(ws_dir):
            usage = _task(task_dir, ws_dir.name, artifact_names, moment)
            report.tasks.append(usage)
            ws = per_ws.setdefault(
                ws_dir.name, WorkspaceDiskUsage(ws_dir.name, short_id(ws_dir.name))
            )
            ws.task_count += 1
            ws.size_bytes += usage.size_bytes
            ws.artifact_size_bytes += usage.artifact_size_bytes
            ws.oldest_age_seconds = max(ws.oldest_age_seconds, usage.age_seconds)
    report.tasks.sort(key=lambda t: t.size_bytes, reverse=True)
    for ws in per_ws.values():
        ws.artifact_ratio = _ratio(ws.artifact_size_bytes, ws.size_bytes)
    report.workspaces = sorted(per_ws.values(), key=lambda w: w.size_bytes, reverse=True)
    report.total_task_count = len(report.tasks)
    report.total_workspace_count = len(report.workspaces)
    report.total_size_bytes = sum(t.size_bytes for t in report.tasks)
    report.total_artifact_size_bytes = sum(t.artifact_size_bytes for t in report.tasks)
    report.total_artifact_ratio = _ratio(report.total_artifact_size_bytes, report.total_size_bytes)
    return report


def _task(task_dir: Path, ws_id: str, names: frozenset[str], now: datetime) -> TaskDiskUsage:
    meta = read_meta(task_dir)
    age = 0.0
    if meta is not None and meta.completed_at is not None:
        age = (now - meta.completed_at).total_seconds()
    else:
        # No completion stamp: the meta file's own age, else (no meta) the directory's.
        # The meta file is the agent's to replace: looked at as itself, never through a link.
        try:
            with opened_dir(task_dir.parent, task_dir.name) as fd:
                info = stat_at(fd, GC_META) if meta is not None else os.fstat(fd)
            age = now.timestamp() - info.st_mtime if info is not None else 0.0
        except OSError:
            age = 0.0
    size, artifacts = task_size(task_dir, names)
    return TaskDiskUsage(
        workspace_id=ws_id,
        workspace_short=short_id(ws_id),
        task_short=task_dir.name,
        path=str(task_dir),
        kind=meta.kind if meta else UNKNOWN_KIND,
        parent_id=meta.parent_id if meta else "",
        parent_status="",
        age_seconds=max(0, int(age)),
        size_bytes=size,
        artifact_size_bytes=artifacts,
    )


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0
