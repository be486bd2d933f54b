"""The GC's half for repository caches: stale worktrees, spent `agent/*` branches, idle caches.

    <root>/.repos/<workspace>/<repo>/     a bare cache; every task's worktree is registered in it

Per cache, under its lock when the cache's owner lends one (`RepoLocks`; a busy cache is left
for the next round), as Multica's daemon does (`gc.go`):

1. `git worktree prune` drops the worktrees whose directories are gone (their task directory
   was removed);
2. every `agent/...` branch no remaining worktree has checked out is deleted — the trailing
   slash of `refs/heads/agent/` keeps a branch named plain `agent` out of it;
3. the cache itself goes when the repo TTL is on, no workspace still lists it, no worktree is
   left, and no checkout stamped it (`.multica_last_used`) within the TTL. A cache with no
   stamp is stamped now and kept: "unknown" never means "ancient".

Git never receives a name that could be read as an option: branch names go after `--`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from daemon.errors import DaemonError
from daemon.files.private import write_atomic
from daemon.times import parse_utc
from daemon.workdirs.cache import CACHE_DIR, LAST_USED
from daemon.workdirs.gc_stats import GcStats
from daemon.workdirs.sizes import dir_size, subdirs

log = logging.getLogger(__name__)

REPOS_DIR = CACHE_DIR
AGENT_REFS = "refs/heads/agent/"
GIT_TIMEOUT = 30.0


class RepoLocks(Protocol):
    """The cache owner's per-repository lock: raises a DaemonError when busy past `wait`."""

    def locked(self, bare: Path, wait: float | None) -> AbstractContextManager[object]:
        """Hold the cache's lock for a `with` block."""
        ...


class RepoJanitor:
    """Prunes and evicts the bare caches under one workspaces root."""

    def __init__(
        self,
        repo_ttl: float,
        *,
        locks: RepoLocks | None = None,
        in_use: Callable[[Path], bool] = lambda bare: False,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.repo_ttl, self.locks, self.in_use, self._now = repo_ttl, locks, in_use, now

    def run(self, root: Path, stats: GcStats) -> None:
        """Every cache under `root/.repos`, each workspace's directory dropped once empty."""
        for ws_dir in subdirs(root / REPOS_DIR):
            for bare in subdirs(ws_dir):
                if (bare / "HEAD").is_file() and (bare / "objects").is_dir():
                    self._one(bare, stats)
            with contextlib.suppress(OSError):
                ws_dir.rmdir()  # only when empty

    def _one(self, bare: Path, stats: GcStats) -> None:
        try:
            with self._locked(bare):
                self._prune(bare, stats)
                self._evict(bare, stats)
        except DaemonError as exc:
            log.info("gc: repo %s busy, next round: %s", bare.name, exc)
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("gc: repo %s: %s", bare.name, exc)

    def _locked(self, bare: Path) -> AbstractContextManager[object]:
        return self.locks.locked(bare, 0.5) if self.locks else contextlib.nullcontext()

    def _prune(self, bare: Path, stats: GcStats) -> None:
        before = _worktrees(bare)
        _git(bare, "worktree", "prune")
        remaining = _worktrees(bare)
        stats.worktrees_pruned += len(before) - len(remaining)
        checked_out = {b for b in remaining.values() if b}
        listed = _git(bare, "for-each-ref", "--format=%(refname)", AGENT_REFS).split()
        for ref in listed:
            if ref in checked_out:
                continue
            _git(bare, "branch", "-D", "--", ref.removeprefix("refs/heads/"))
            stats.branches_deleted += 1
        if len(listed) > len(checked_out):
            log.info("gc: repo %s: %d worktrees, agent branches pruned", bare.name, len(remaining))

    def _evict(self, bare: Path, stats: GcStats) -> None:
        if self.repo_ttl <= 0 or self.in_use(bare) or _worktrees(bare):
            return
        try:
            stamp = parse_utc((bare / LAST_USED).read_text())
        except OSError:
            stamp = None
        now = self._now()
        if stamp is None:
            write_atomic(bare / LAST_USED, now.isoformat().replace("+00:00", "Z"), durable=False)
            return
        if (now - stamp).total_seconds() <= self.repo_ttl or self.in_use(bare):
            return
        size = dir_size(bare)
        shutil.rmtree(bare)
        stats.repo_caches_reclaimed += 1
        stats.bytes_reclaimed += size
        log.info("gc: repo cache %s evicted, idle since %s (%d bytes)", bare.name, stamp, size)


def _worktrees(bare: Path) -> dict[str, str]:
    """Linked worktrees of a bare cache: path → checked-out branch ref ('' when detached)."""
    found: dict[str, str] = {}
    path, branch, is_bare = "", "", False
    for line in [*_git(bare, "worktree", "list", "--porcelain").splitlines(), ""]:
        if line.startswith("worktree "):
            path, branch, is_bare = line.removeprefix("worktree "), "", False
        elif line.startswith("branch "):
            branch = line.removeprefix("branch ")
        elif line == "bare":
            is_bare = True
        elif not line and path:
            if not is_bare:
                found[path] = branch
            path = ""
    return found


def _git(bare: Path, *args: str) -> str:
    # Local commands only: nothing here fetches, so nothing can prompt for a login.
    done = subprocess.run(
        ["git", "-C", str(bare), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise OSError(f"git {args[0]} failed: {done.stderr.strip()[:300]}")
    return done.stdout
