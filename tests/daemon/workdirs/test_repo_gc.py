"""Repository caches under `.repos`: stale worktrees and agent branches pruned, idle caches
evicted — real git, a bare cache laid out as Multica's daemon lays it out."""

from __future__ import annotations

import os
import shutil
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from daemon.errors import DaemonError
from daemon.protocol.models import RepoRef
from daemon.protocol.runtime_models import WorkspaceRepos
from daemon.workdirs.gc_stats import GcStats
from daemon.workdirs.repo_gc import LAST_USED, RepoJanitor
from daemon.workdirs.service import Workdirs
from tests.daemon.workdirs.support import NOW, POLICY, FakeLookup, ago, collector, git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _cache(root: Path, tmp_path: Path) -> Path:
    """An origin with one commit, and its bare cache at `<root>/.repos/ws-1/repo.git`."""
    origin = tmp_path / "origin"
    git("init", "-q", "-b", "main", str(origin))
    (origin / "README").write_text("hello\n")
    git("add", "README", cwd=origin)
    git("commit", "-qm", "first", cwd=origin)
    bare = root / ".repos" / "ws-1" / "repo.git"
    git("clone", "-q", "--bare", str(origin), str(bare))
    return bare


def _worktree(bare: Path, root: Path, task: str, branch: str) -> Path:
    path = root / "ws-1" / task / "workdir" / "repo"
    git("-C", str(bare), "worktree", "add", "-q", "-b", branch, str(path), "main")
    return path


def _branches(bare: Path) -> set[str]:
    return set(
        git("-C", str(bare), "for-each-ref", "--format=%(refname:short)", "refs/heads/").split()
    )


def test_removed_task_dirs_lose_their_worktree_and_agent_branch(tmp_path: Path) -> None:
    """A task dir gone: its worktree is pruned and its agent/ branch deleted; a live worktree's
    branch and branches outside agent/ (`main`, `agents-notes`) stay."""
    root = tmp_path / "root"
    bare = _cache(root, tmp_path)
    _worktree(bare, root, "t-gone", "agent/bot/t-gone")
    live = _worktree(bare, root, "t-live", "agent/bot/t-live")
    git("-C", str(bare), "branch", "agent/bot/never-checked-out", "main")
    git("-C", str(bare), "branch", "agents-notes", "main")
    shutil.rmtree(root / "ws-1" / "t-gone")
    stats = GcStats()
    RepoJanitor(POLICY.repo_ttl, now=lambda: NOW).run(root, stats)
    assert _branches(bare) == {"main", "agents-notes", "agent/bot/t-live"}
    assert stats.worktrees_pruned == 1 and stats.branches_deleted == 2
    assert (live / "README").exists()
    assert str(live) in git("-C", str(bare), "worktree", "list")


def test_a_gc_round_removes_a_done_task_and_then_its_worktree(tmp_path: Path) -> None:
    """The whole round: the task dir goes (orphaned), then its worktree and branch with it."""
    root = tmp_path / "root"
    bare = _cache(root, tmp_path)
    _worktree(bare, root, "t-old", "agent/bot/t-old")
    old = root / "ws-1" / "t-old"
    stamp = ago(100).timestamp()
    os.utime(old, (stamp, stamp))
    stats = collector(root, FakeLookup()).run_round()
    assert not old.exists()
    assert _branches(bare) == {"main"}
    assert stats.orphaned == 1 and stats.branches_deleted == 1


def test_an_idle_cache_is_evicted_only_when_nothing_needs_it(tmp_path: Path) -> None:
    """Stamped 31 days ago, no worktree, not listed: evicted. No stamp: stamped now, kept.
    Stamped yesterday, listed by a workspace, or with a worktree: kept."""
    caches = {}
    for name in ("idle", "unstamped", "recent", "listed", "checked-out"):
        root = tmp_path / name
        caches[name] = (root, _cache(root, tmp_path / f"src-{name}"))
    stamps = {
        "idle": ago(31 * 24),
        "recent": ago(24),
        "listed": ago(40 * 24),
        "checked-out": ago(40 * 24),
    }
    for name, moment in stamps.items():
        (caches[name][1] / LAST_USED).write_text(moment.isoformat().replace("+00:00", "Z"))
    root, bare = caches["checked-out"]
    _worktree(bare, root, "t", "agent/bot/t")
    listed = caches["listed"][1]
    for name, (root, bare) in caches.items():
        stats = GcStats()
        janitor = RepoJanitor(POLICY.repo_ttl, in_use=lambda b: b == listed, now=lambda: NOW)
        janitor.run(root, stats)
        assert bare.exists() == (name != "idle"), name
        assert stats.repo_caches_reclaimed == (1 if name == "idle" else 0)
    assert not (tmp_path / "idle" / ".repos" / "ws-1").exists()
    assert (caches["unstamped"][1] / LAST_USED).read_text().startswith("2026-06-01T12:00")


def test_a_busy_cache_waits_for_the_next_round(tmp_path: Path) -> None:
    """A cache whose owner holds its lock is left alone this round (no error)."""

    class Busy:
        def locked(self, bare: Path, wait: float | None) -> AbstractContextManager[object]:
            raise DaemonError("the repository is busy with another operation")

    root = tmp_path / "root"
    bare = _cache(root, tmp_path)
    git("-C", str(bare), "branch", "agent/bot/stale", "main")
    stats = GcStats()
    RepoJanitor(POLICY.repo_ttl, locks=Busy(), now=lambda: NOW).run(root, stats)
    assert "agent/bot/stale" in _branches(bare)


def test_the_checkout_caches_lock_and_list_hold_the_gc_off(tmp_path: Path) -> None:
    """Wired as the worker wires it: a cache whose lock a checkout holds is left alone, and a
    cache a workspace still lists is never evicted, however idle."""
    root = tmp_path / "root"
    origin = tmp_path / "origin"
    workdirs = Workdirs(root, {"PATH": os.environ.get("PATH", "")}, _no_refresh)
    bare = workdirs.cache.bare_path("ws-1", str(origin))
    git("init", "-q", "-b", "main", str(origin))
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=origin)
    git("clone", "-q", "--bare", str(origin), str(bare))
    git("-C", str(bare), "branch", "agent/bot/stale", "main")
    (bare / LAST_USED).write_text(ago(40 * 24).isoformat().replace("+00:00", "Z"))
    janitor = RepoJanitor(
        POLICY.repo_ttl, locks=workdirs.cache, in_use=workdirs.listed, now=lambda: NOW
    )
    with workdirs.cache.locked(bare, None):
        janitor.run(root, GcStats())
    assert "agent/bot/stale" in _branches(bare)
    workdirs.learned("ws-1", [RepoRef(url=str(origin))])
    janitor.run(root, GcStats())
    assert _branches(bare) == {"main"} and bare.exists()
    workdirs.learned("ws-1", [])
    janitor.run(root, GcStats())
    assert not bare.exists()


async def _no_refresh(workspace_id: str) -> WorkspaceRepos:
    raise AssertionError("the GC never asks the server for repositories")
