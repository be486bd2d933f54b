"""Task directories and parent records for the GC's tests: real files, a fake clock."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from daemon.errors import TransientServerError
from daemon.protocol.gc_check import NOT_FOUND, ParentState
from daemon.workdirs.gc import Collector, GcPolicy
from daemon.workdirs.gc_meta import GcMeta, write_meta
from daemon.workdirs.leases import DirLeases
from daemon.workdirs.repo_gc import RepoJanitor

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
HOUR = 3600.0
POLICY = GcPolicy(
    ttl=24 * HOUR,
    orphan_ttl=72 * HOUR,
    artifact_ttl=12 * HOUR,
    artifact_names=frozenset({"node_modules", ".next"}),
    repo_ttl=30 * 24 * HOUR,
)


def ago(hours: float) -> datetime:
    """The fake clock's now minus `hours`."""
    return NOW - timedelta(hours=hours)


@dataclass
class FakeLookup:
    """Parent records by id (issues apart); `down` makes every call fail as an outage would."""

    issue_states: dict[str, ParentState] = field(default_factory=dict)
    records: dict[str, ParentState] = field(default_factory=dict)
    down: bool = False
    asked: list[tuple[str, list[str]]] = field(default_factory=list)

    def _check(self) -> None:
        if self.down:
            raise TransientServerError("gc_check", "connection refused")

    def issues(self, workspace_id: str, issue_ids: list[str]) -> dict[str, ParentState]:
        self._check()
        self.asked.append((workspace_id, issue_ids))
        return {i: self.issue_states.get(i, NOT_FOUND) for i in issue_ids}

    def chat(self, session_id: str) -> ParentState:
        self._check()
        return self.records.get(session_id, NOT_FOUND)

    def autopilot_run(self, run_id: str) -> ParentState:
        return self.chat(run_id)

    def task(self, task_id: str) -> ParentState:
        return self.chat(task_id)


def task_dir(
    root: Path, name: str, meta: GcMeta | None = None, completed: datetime | None = None
) -> Path:
    """A task directory with a work dir and a file in it, and its meta if given."""
    env_root = root / "ws-1" / name
    (env_root / "workdir").mkdir(parents=True)
    (env_root / "workdir" / "main.py").write_text("print('work')\n")
    if meta is not None:
        write_meta(env_root, meta, completed or ago(1))
    return env_root


def age_dir(path: Path, hours: float) -> None:
    """Set a directory's mtime `hours` before the fake now."""
    stamp = ago(hours).timestamp()
    os.utime(path, (stamp, stamp))


def collector(root: Path, lookup: FakeLookup, leases: DirLeases | None = None) -> Collector:
    """A collector over `root` on the fake clock."""
    repos = RepoJanitor(POLICY.repo_ttl, now=lambda: NOW)
    return Collector(root, POLICY, lookup, leases or DirLeases(), repos=repos, now=lambda: NOW)


def git(*args: str, cwd: Path | None = None) -> str:
    """Run git and return its output; a failure fails the test."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True, timeout=30
    )
    return done.stdout
