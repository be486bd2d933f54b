"""`agent-daemon disk-usage`: the scan of disk_usage.py as Multica's tables, or its JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from daemon.cli.status_view import table
from daemon.times import format_duration
from daemon.workdirs.disk_usage import DiskUsageReport, scan
from daemon.workdirs.sizes import artifact_names, format_bytes


def disk_usage(
    root: Path,
    patterns: Sequence[str],
    out: TextIO,
    *,
    as_json: bool = False,
    by_workspace: bool = False,
    top: int = 0,
) -> int:
    """Scan `root` and print the report (the `top` largest rows when `top` > 0)."""
    report = scan(root.expanduser().absolute(), artifact_names(patterns))
    report.keep_top(top, by_workspace=by_workspace)
    if as_json:
        print(json.dumps(report.as_json(), indent=2), file=out)
    else:
        print(render(report, by_workspace=by_workspace), file=out)
    return 0


def render(report: DiskUsageReport, *, by_workspace: bool) -> str:
    """The per-task (default) or per-workspace table with its totals line."""
    lines = [f"Workspaces root: {report.workspaces_root}"]
    if by_workspace:
        shown, total, what = len(report.workspaces), report.total_workspace_count, "workspace"
        header = ("WORKSPACE", "TASKS", "SIZE", "ARTIFACTS", "ARTIFACT %", "OLDEST")
        rows = [
            (
                w.workspace_short,
                str(w.task_count),
                format_bytes(w.size_bytes),
                format_bytes(w.artifact_size_bytes),
                f"{w.artifact_ratio * 100:.1f}%",
                _age(w.oldest_age_seconds),
            )
            for w in report.workspaces
        ]
        sizes = [(w.size_bytes, w.artifact_size_bytes) for w in report.workspaces]
    else:
        shown, total, what = len(report.tasks), report.total_task_count, "task"
        header = ("PATH", "KIND", "STATUS", "AGE", "SIZE", "ARTIFACTS")
        rows = [
            (
                f"{t.workspace_short}/{t.task_short}",
                t.kind,
                t.parent_status or "-",
                _age(t.age_seconds),
                format_bytes(t.size_bytes),
                format_bytes(t.artifact_size_bytes),
            )
            for t in report.tasks
        ]
        sizes = [(t.size_bytes, t.artifact_size_bytes) for t in report.tasks]
    if not total:
        lines.append(f"(no {what} directories)" if what == "task" else "(no workspaces)")
    else:
        lines += [*table(header, rows), ""]
        ratio = report.total_artifact_ratio * 100
        scanned = format_bytes(report.total_size_bytes)
        artifacts = format_bytes(report.total_artifact_size_bytes)
        if shown < total:
            lines.append(
                f"Showing top {shown} of {total} {what}(s). Displayed: "
                f"{format_bytes(sum(s for s, _ in sizes))} "
                f"({format_bytes(sum(a for _, a in sizes))} artifacts). "
                f"Scan total: {scanned} ({artifacts} artifacts, {ratio:.1f}% reclaimable)."
            )
        else:
            lines.append(
                f"Total: {scanned} across {total} {what}(s); {artifacts} reclaimable as "
                f"artifacts ({ratio:.1f}%)."
            )
    if report.repo_cache_count or report.repo_cache_size_bytes:
        lines.append(
            f"Repo cache (.repos): {format_bytes(report.repo_cache_size_bytes)} across "
            f"{report.repo_cache_count} repo(s), not included above. Evicted once a repo is "
            "unused for MULTICA_GC_REPO_TTL and no longer attached to a workspace."
        )
    return "\n".join(lines)


def _age(seconds: int) -> str:
    return format_duration(float(seconds)) if seconds > 0 else "-"
