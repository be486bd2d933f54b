"""`agent-daemon disk-usage`: the root measured per task and workspace, as Multica reports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from daemon.workdirs.disk_usage import scan
from daemon.workdirs.gc_meta import GcMeta
from tests.daemon.workdirs.support import NOW, age_dir, ago, task_dir

# The JSON fields of Go's DiskUsageReport, TaskDiskUsage and WorkspaceDiskUsage.
REPORT_FIELDS = {
    "workspaces_root",
    "generated_at",
    "artifact_patterns",
    "managed_artifact_subpaths",
    "tasks",
    "workspaces",
    "total_task_count",
    "total_workspace_count",
    "total_size_bytes",
    "total_artifact_size_bytes",
    "total_artifact_ratio",
    "repo_cache_size_bytes",
    "repo_cache_count",
}
TASK_FIELDS = {
    "workspace_id",
    "workspace_short",
    "task_short",
    "path",
    "kind",
    "parent_id",
    "parent_status",
    "age_seconds",
    "size_bytes",
    "artifact_size_bytes",
}
WORKSPACE_FIELDS = {
    "workspace_id",
    "workspace_short",
    "task_count",
    "size_bytes",
    "artifact_size_bytes",
    "artifact_ratio",
    "oldest_age_seconds",
}


def _root(tmp_path: Path) -> Path:
    """Two tasks (one with 3000 bytes of node_modules), a repo cache, the skill cache."""
    root = tmp_path / "root"
    big = task_dir(root, "t-big", GcMeta("issue", "ws-1", issue_id="i-1"), completed=ago(2))
    (big / "workdir" / "node_modules").mkdir()
    (big / "workdir" / "node_modules" / "a.js").write_text("x" * 3000)
    (big / "workdir" / ".git").mkdir()
    (big / "workdir" / ".git" / "pack").write_text("y" * 500)
    small = task_dir(root, "t-small")
    age_dir(small, 5)
    (root / ".repos" / "ws-1" / "repo.git").mkdir(parents=True)
    (root / ".repos" / "ws-1" / "repo.git" / "HEAD").write_text("z" * 100)
    (root / ".skill-cache" / "v1").mkdir(parents=True)
    (root / ".skill-cache" / "v1" / "bundle.json").write_text("{}")
    return root


def test_the_report_has_gos_fields_and_sums(tmp_path: Path) -> None:
    """Field names as Go's; .git counts in the size, never in artifacts; caches apart."""
    report = scan(_root(tmp_path), frozenset({"node_modules"}), NOW).as_json()
    assert set(report) == REPORT_FIELDS
    assert all(set(t) == TASK_FIELDS for t in report["tasks"])
    assert all(set(w) == WORKSPACE_FIELDS for w in report["workspaces"])
    big, small = report["tasks"]
    main_py = len("print('work')\n")
    assert big["size_bytes"] == 3000 + 500 + main_py + len(
        (tmp_path / "root/ws-1/t-big/.gc_meta.json").read_text()
    )
    assert big["artifact_size_bytes"] == 3000
    assert (big["kind"], big["parent_id"], big["age_seconds"]) == ("issue", "i-1", 7200)
    assert (small["kind"], small["age_seconds"]) == ("unknown", 5 * 3600)
    assert report["total_task_count"] == 2 and report["total_workspace_count"] == 1
    assert report["repo_cache_count"] == 1 and report["repo_cache_size_bytes"] == 100
    assert report["total_size_bytes"] == big["size_bytes"] + small["size_bytes"]
    assert report["workspaces"][0]["oldest_age_seconds"] == 5 * 3600


def test_the_command_scans_a_root_without_a_daemon(tmp_path: Path) -> None:
    """`disk-usage --output json --top 1` prints the largest task and the whole scan's totals;
    `--by-workspace` prints the workspace table."""
    root = _root(tmp_path)
    env = {"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    argv = [sys.executable, "-m", "daemon", "disk-usage", "--workspaces-root", str(root)]
    done = subprocess.run(
        [*argv, "--output", "json", "--top", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    report = json.loads(done.stdout)
    assert [t["task_short"] for t in report["tasks"]] == ["t-big"]
    assert report["total_task_count"] == 2
    table = subprocess.run(
        [*argv, "--by-workspace"], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    assert "WORKSPACE  TASKS  SIZE" in table.stdout
    assert "Repo cache (.repos): 100 B across 1 repo(s)" in table.stdout
    bad = subprocess.run(
        [*argv, "--top", "-1"], capture_output=True, text=True, env=env, timeout=60
    )
    assert bad.returncode == 2
