"""The GC loop: a round after start-up, then one every `MULTICA_GC_INTERVAL`.

Each round runs in a worker thread — the walk, the removals and git — so a heartbeat or a claim
never waits on it; only the gc-check calls hop back to the event loop, each tried once. An
error costs that round, never the daemon. After each round the root is measured (disk_usage.py)
for the gauges and `status`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import anyio
import anyio.from_thread

from daemon.config import Settings
from daemon.ops.metrics import Metrics
from daemon.protocol.client import ServerClient
from daemon.protocol.gc_check import GcChecks, ParentState
from daemon.snapshot import DiskSnapshot
from daemon.workdirs.disk_usage import scan
from daemon.workdirs.gc import Collector, GcPolicy
from daemon.workdirs.gc_stats import GcStats
from daemon.workdirs.leases import DirLeases
from daemon.workdirs.repo_gc import RepoJanitor, RepoLocks
from daemon.workdirs.sizes import artifact_names

log = logging.getLogger(__name__)

FIRST_DELAY = 30.0
"""Seconds after start before the first round: the daemon's own start-up goes first."""


class ThreadLookup:
    """The server's gc-check answers for the GC's thread: each call runs on the event loop."""

    def __init__(self, checks: GcChecks) -> None:
        self._checks = checks

    def issues(self, workspace_id: str, issue_ids: list[str]) -> dict[str, ParentState]:
        """States of these issues of one workspace."""
        return anyio.from_thread.run(self._checks.issues, workspace_id, issue_ids)

    def chat(self, session_id: str) -> ParentState:
        """A chat session's state."""
        return anyio.from_thread.run(self._checks.chat, session_id)

    def autopilot_run(self, run_id: str) -> ParentState:
        """An autopilot run's state."""
        return anyio.from_thread.run(self._checks.autopilot_run, run_id)

    def task(self, task_id: str) -> ParentState:
        """A task's own state."""
        return anyio.from_thread.run(self._checks.task, task_id)


def policy_of(settings: Settings) -> GcPolicy:
    """The GC's TTLs and build-output names from the settings."""
    return GcPolicy(
        ttl=settings.gc_ttl,
        orphan_ttl=settings.gc_orphan_ttl,
        artifact_ttl=settings.gc_artifact_ttl,
        artifact_names=artifact_names(settings.gc_artifact_patterns),
        repo_ttl=settings.gc_repo_ttl,
    )


class GcLoop:
    """Runs GC rounds for the worker and keeps the last measurement of the root."""

    def __init__(
        self,
        settings: Settings,
        client: ServerClient,
        leases: DirLeases,
        metrics: Metrics,
        *,
        repo_locks: RepoLocks | None = None,
        repo_in_use: Callable[[Path], bool] = lambda bare: False,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`repo_locks` and `repo_in_use` come from the repository cache's owner: its
        per-repository lock, and whether a served workspace still lists a cache."""
        self.settings, self.metrics = settings, metrics
        policy = policy_of(settings)
        repos = RepoJanitor(policy.repo_ttl, locks=repo_locks, in_use=repo_in_use, now=now)
        lookup = ThreadLookup(GcChecks(client))
        self.collector = Collector(
            settings.workspaces_root, policy, lookup, leases, repos=repos, now=now
        )
        self._now = now
        self.disk: DiskSnapshot | None = None
        """The root as the last round measured it (None before the first)."""

    async def run(self, first_delay: float = FIRST_DELAY) -> None:
        """Rounds until cancelled (nothing when MULTICA_GC_ENABLED is off)."""
        if not self.settings.gc_enabled:
            log.info("gc: disabled")
            return
        s = self.settings
        log.info(
            "gc: every %ss; ttl %ss, orphan ttl %ss, artifact ttl %ss %s, repo ttl %ss",
            s.gc_interval,
            s.gc_ttl,
            s.gc_orphan_ttl,
            s.gc_artifact_ttl,
            ",".join(s.gc_artifact_patterns),
            s.gc_repo_ttl,
        )
        await anyio.sleep(first_delay)
        while True:
            await self.round()
            await anyio.sleep(s.gc_interval)

    async def round(self) -> GcStats | None:
        """One round in a worker thread; None when it failed (logged, counted)."""
        try:
            # Abandoned on cancel: a stopping daemon does not wait for a walk of the whole root.
            stats = await anyio.to_thread.run_sync(self._round, abandon_on_cancel=True)
        except Exception:
            log.exception("gc: round failed; the next one is in %ss", self.settings.gc_interval)
            self.metrics.gc_rounds.labels("error").inc()
            return None
        self.metrics.gc_rounds.labels("ok").inc()
        log.info("%s", stats.line())
        return stats

    def _round(self) -> GcStats:
        stats = self.collector.run_round()
        m = self.metrics
        for what, count in (
            ("cleaned", stats.cleaned),
            ("orphaned", stats.orphaned),
            ("artifacts", stats.artifact_removed),
            ("repo_caches", stats.repo_caches_reclaimed),
        ):
            m.gc_removed.labels(what).inc(count)
        m.gc_reclaimed_bytes.inc(stats.bytes_reclaimed)
        policy = self.collector.policy
        report = scan(self.settings.workspaces_root, policy.artifact_names, self._now())
        self.disk = DiskSnapshot(
            measured_at=report.generated_at,
            task_dirs=report.total_task_count,
            task_bytes=report.total_size_bytes,
            artifact_bytes=report.total_artifact_size_bytes,
            repo_caches=report.repo_cache_count,
            repo_cache_bytes=report.repo_cache_size_bytes,
        )
        m.workdir_tasks.set(report.total_task_count)
        m.workdir_bytes.labels("tasks").set(report.total_size_bytes)
        m.workdir_bytes.labels("artifacts").set(report.total_artifact_size_bytes)
        m.workdir_bytes.labels("repo_caches").set(report.repo_cache_size_bytes)
        return stats
