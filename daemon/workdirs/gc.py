"""One GC round over the workspaces root, as Multica's daemon collects (`gc.go`).

    <root>/<workspace>/<task>/     a task directory: removed when its parent record is done
    <root>/.repos/<ws>/<repo>/     bare repository caches: see repo_gc.py
    <root>/.<anything else>/       the daemon's own caches (skill bundles): never walked

Per task directory, by its `.gc_meta.json` (gc_meta.py):

- held by a running task (leases.py): kept, whatever its parent says;
- no meta, or a kind this daemon does not know: removed once older than the orphan TTL;
- an issue (asked in one batch per workspace): done or cancelled and not updated for the TTL →
  removed; not found → the orphan rule (a 404 may only mean the token cannot see it); still
  open but its task completed longer than the artifact TTL ago → build outputs removed;
- a chat session: not found (deleted) → removed; archived for the TTL → removed; active → kept;
- an autopilot run or a quick-create task: removed once terminal; not found → the orphan rule;
- a task with no parent (`task`, the embedded server's): terminal for the TTL → removed.

No answer from the server (an outage, a refused batch) keeps every directory it concerns for
this round. The round runs in a worker thread; the server is asked through a `ParentLookup`
that hops back to the event loop for each call.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Protocol

from daemon.boundary.beneath import opened_dir, remove_under
from daemon.errors import ServerError
from daemon.protocol.gc_check import ParentState
from daemon.workdirs import gc_meta
from daemon.workdirs.gc_meta import GcMeta, read_meta
from daemon.workdirs.gc_stats import GcStats
from daemon.workdirs.leases import DirLeases
from daemon.workdirs.repo_gc import RepoJanitor
from daemon.workdirs.sizes import dir_size, remove_artifacts, subdirs

log = logging.getLogger(__name__)

_DONE_ISSUE = ("done", "cancelled")
_DONE_RUN = ("completed", "failed", "skipped", "issue_created")
_DONE_TASK = ("completed", "failed", "cancelled")


class ParentLookup(Protocol):
    """The server's gc-check answers, called from the GC's thread; ServerError = no answer."""

    def issues(self, workspace_id: str, issue_ids: list[str]) -> dict[str, ParentState]:
        """States of these issues of one workspace (an id left out: no answer for it)."""
        ...

    def chat(self, session_id: str) -> ParentState:
        """A chat session's state."""
        ...

    def autopilot_run(self, run_id: str) -> ParentState:
        """An autopilot run's state."""
        ...

    def task(self, task_id: str) -> ParentState:
        """A task's own state."""
        ...


@dataclass(frozen=True, slots=True)
class GcPolicy:
    """How long each kind of directory stays (seconds; 0 turns artifact/repo cleanup off)."""

    ttl: float
    orphan_ttl: float
    artifact_ttl: float
    artifact_names: frozenset[str]
    repo_ttl: float


class Action(Enum):
    """What a round does with one task directory."""

    KEEP = "keep"
    CLEAN = "clean"
    ORPHAN = "orphan"
    ARTIFACTS = "artifacts"


class Collector:
    """Runs GC rounds over one workspaces root."""

    def __init__(
        self,
        root: Path,
        policy: GcPolicy,
        lookup: ParentLookup,
        leases: DirLeases,
        *,
        repos: RepoJanitor | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_artifact: Callable[[str], None] = lambda name: None,
    ) -> None:
        """`on_artifact(name)` is told of each build output before its removal (a seam for
        tests that play an agent swapping folders at that moment)."""
        self.root, self.policy, self.lookup, self.leases = root, policy, lookup, leases
        self.repos = repos or RepoJanitor(policy.repo_ttl, now=now)
        self._now = now
        self._on_artifact = on_artifact

    def run_round(self) -> GcStats:
        """One pass: every workspace's task directories, then the repository caches."""
        stats = GcStats()
        for ws_dir in subdirs(self.root):
            # Dot directories are the daemon's own caches; a workspace id never starts with one.
            if not ws_dir.name.startswith("."):
                self._workspace(ws_dir, stats)
        self.repos.run(self.root, stats)
        return stats

    def _workspace(self, ws_dir: Path, stats: GcStats) -> None:
        issues: list[tuple[Path, GcMeta]] = []
        removed = 0
        for task_dir in subdirs(ws_dir):
            if self.leases.in_use(task_dir):
                stats.skipped += 1
                continue
            meta = read_meta(task_dir)
            if meta is not None and meta.kind == gc_meta.ISSUE and meta.parent_id:
                issues.append((task_dir, meta))
                continue
            removed += self._apply(task_dir, self._decide(task_dir, meta), stats)
        if issues:
            answers = self._issue_states(ws_dir.name, [m.parent_id for _, m in issues])
            for task_dir, meta in issues:
                state = answers.get(meta.parent_id)
                action = Action.KEEP if state is None else self._issue(task_dir, meta, state)
                removed += self._apply(task_dir, _local(meta, action, self.policy), stats)
        if removed:
            # Not empty: a task made its directory meanwhile, and it stays.
            with contextlib.suppress(OSError), opened_dir(ws_dir.parent) as parent:
                os.rmdir(ws_dir.name, dir_fd=parent)

    def _issue_states(self, workspace_id: str, ids: list[str]) -> dict[str, ParentState]:
        try:
            return self.lookup.issues(workspace_id, list(dict.fromkeys(ids)))
        except ServerError as exc:
            log.warning("gc: issue check for workspace %s failed: %s", workspace_id, exc)
            return {}

    def _decide(self, task_dir: Path, meta: GcMeta | None) -> Action:
        if meta is None:
            return self._orphan(task_dir)
        ask = {
            gc_meta.CHAT: (self.lookup.chat, self._chat),
            gc_meta.AUTOPILOT_RUN: (self.lookup.autopilot_run, self._terminal(_DONE_RUN)),
            gc_meta.QUICK_CREATE: (self.lookup.task, self._terminal(_DONE_TASK)),
            gc_meta.TASK: (self.lookup.task, self._own_task),
        }.get(meta.kind)
        if ask is None or not meta.parent_id:
            return self._orphan(task_dir)
        call, judge = ask
        try:
            state = call(meta.parent_id)
        except ServerError as exc:
            log.warning("gc: %s check failed: %s", meta.kind, exc)
            return Action.KEEP
        return _local(meta, judge(task_dir, meta, state), self.policy)

    def _issue(self, task_dir: Path, meta: GcMeta, state: ParentState) -> Action:
        if not state.found:
            return self._orphan(task_dir)
        if state.status in _DONE_ISSUE and self._older(state.updated_at, self.policy.ttl):
            log.info("gc: %s: issue %s is %s", task_dir.name, meta.issue_id, state.status)
            return Action.CLEAN
        artifact_ttl = self.policy.artifact_ttl
        if artifact_ttl > 0 and self._older(meta.completed_at, artifact_ttl):
            return Action.ARTIFACTS
        return Action.KEEP

    def _chat(self, task_dir: Path, meta: GcMeta, state: ParentState) -> Action:
        # A chat session is deleted for real (no anti-enumeration 404 here): its directory goes.
        if not state.found:
            return Action.CLEAN
        if state.status == "archived" and self._older(state.updated_at, self.policy.ttl):
            return Action.CLEAN
        return Action.KEEP

    def _terminal(self, done: tuple[str, ...]) -> Callable[[Path, GcMeta, ParentState], Action]:
        # An autopilot run's or a quick-create task's directory is never reused: it goes as soon
        # as its record is terminal.
        def judge(task_dir: Path, meta: GcMeta, state: ParentState) -> Action:
            if not state.found:
                return self._orphan(task_dir)
            return Action.CLEAN if state.status in done else Action.KEEP

        return judge

    def _own_task(self, task_dir: Path, meta: GcMeta, state: ParentState) -> Action:
        if not state.found:
            return self._orphan(task_dir)
        finished = state.updated_at or meta.completed_at
        if state.status in _DONE_TASK and self._older(finished, self.policy.ttl):
            return Action.CLEAN
        return Action.KEEP

    def _orphan(self, task_dir: Path) -> Action:
        try:
            mtime = task_dir.stat().st_mtime
        except OSError:
            return Action.KEEP
        moment = datetime.fromtimestamp(mtime, UTC)
        return Action.ORPHAN if self._older(moment, self.policy.orphan_ttl) else Action.KEEP

    def _older(self, moment: datetime | None, ttl: float) -> bool:
        return moment is not None and (self._now() - moment).total_seconds() > ttl

    def _apply(self, task_dir: Path, action: Action, stats: GcStats) -> int:
        if action is Action.KEEP:
            stats.skipped += 1
            return 0
        with self.leases.reclaiming(task_dir) as free:
            if not free:  # a task took it while the server was asked
                stats.skipped += 1
                return 0
            if action is Action.ARTIFACTS:
                names = self.policy.artifact_names
                removed, freed, by_name = remove_artifacts(task_dir, names, self._on_artifact)
                stats.skipped += 1
                if removed:
                    stats.artifact_dirs += 1
                    stats.artifact_removed += removed
                    stats.bytes_reclaimed += freed
                    for name, count in by_name.items():
                        stats.by_pattern[name] = stats.by_pattern.get(name, 0) + count
                return 0
            size = dir_size(task_dir)
            try:
                # From the workspace's folder (the daemon's own, 0711): below it, through
                # handles only, iteratively (a chain thousands deep is no RecursionError).
                remove_under(task_dir.parent, task_dir.name)
            except OSError as exc:
                log.warning("gc: cannot remove %s: %s", task_dir, exc)
                return 0
        log.info("gc: removed %s (%s, %d bytes)", task_dir, action.value, size)
        stats.bytes_reclaimed += size
        if action is Action.CLEAN:
            stats.cleaned += 1
        else:
            stats.orphaned += 1
        return 1


def _local(meta: GcMeta, action: Action, policy: GcPolicy) -> Action:
    """A user's own directory (`local_directory`, written by Multica's daemon) is never removed
    whole: a clean becomes an artifact cleanup, an orphan nothing."""
    if not meta.local_directory:
        return action
    if action is Action.CLEAN and policy.artifact_ttl > 0:
        return Action.ARTIFACTS
    return Action.KEEP if action in (Action.CLEAN, Action.ORPHAN) else action
