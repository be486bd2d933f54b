"""Bare clones of a workspace's repositories, one per workspace and URL, under `.repos/`.

    <workspaces root>/.repos/<workspace>/<github.com+org+repo.git>/

A cache is cloned once (in the background after register, or on a task's first checkout),
fetched before every checkout, and is the object store every task's worktree shares. Its
fetch refspec keeps the remote's branches under `refs/remotes/origin/*`: `refs/heads/*` is for
the tasks' own `agent/...` branches, which a mirror-style fetch would collide with.

Each cache has its own lock: git's lock files do not tolerate two mutations of one repository
at once (a fetch and a `worktree add`), while different repositories go on side by side.

With an agent user (`shared`), the caches stay the daemon's, readable but not writable by the
agent user, and `.repos/` and each workspace's directory can be passed through but not listed
(0711): the agent user's git clones from a cache into the task's own directory.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path

from daemon.boundary.agent_user import open_to_pass
from daemon.errors import GitError, RepoBusyError
from daemon.files.private import ensure_dir, path_part, write_atomic
from daemon.times import utc_iso
from daemon.workdirs.git import TIMEOUT, Git, redact
from daemon.workdirs.names import bare_dir_name

log = logging.getLogger(__name__)

CACHE_DIR = ".repos"
LAST_USED = ".multica_last_used"
"""In each cache: when a task last asked for a checkout from it (Multica's GC reads it)."""
FETCH_REFSPEC = "+refs/heads/*:refs/remotes/origin/*"
ORIGIN = "refs/remotes/origin/"


class RepoCache:
    """The bare caches under one workspaces root, each behind its own lock."""

    def __init__(self, workspaces_root: Path, git: Git, *, shared: bool = False) -> None:
        self.root = workspaces_root / CACHE_DIR
        self.git = git
        self.shared = shared
        self._locks: dict[Path, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def bare_path(self, workspace_id: str, url: str) -> Path:
        """Where the cache of `url` in this workspace lives, whether or not it exists yet."""
        return self.root / path_part(workspace_id) / bare_dir_name(url)

    def is_cached(self, workspace_id: str, url: str) -> bool:
        """True once the cache has been cloned (a bare repository has `HEAD` at its top)."""
        return (self.bare_path(workspace_id, url) / "HEAD").is_file()

    def locked(self, bare: Path, wait: float | None) -> _Held:
        """The cache's lock, held for a `with` block; RepoBusyError after `wait` seconds."""
        with self._locks_guard:
            lock = self._locks.setdefault(bare, threading.Lock())
        return _Held(lock, wait)

    def sync(self, workspace_id: str, urls: list[str]) -> str:
        """Clone the repositories not cached yet and fetch the others; the first error or ''."""
        first = ""
        for url in urls:
            bare = self.bare_path(workspace_id, url)
            try:
                with self.locked(bare, None):
                    self.ensure(bare, url)
            except GitError as exc:
                log.warning("repo cache: %s in workspace %s: %s", redact(url), workspace_id, exc)
                first = first or str(exc)
        return first

    def ensure(self, bare: Path, url: str) -> None:
        """Clone `url` into `bare` when it is not there, else fetch it (the lock held)."""
        ensure_dir(bare.parent)
        if self.shared:  # also for caches made before agents had a user of their own
            open_to_pass(self.root)
            open_to_pass(bare.parent)
        if (bare / "HEAD").is_file():
            self.fetch(bare)
            return
        log.info("repo cache: cloning %s", redact(url))
        started = time.monotonic()
        # Readable by others (its parents decide who may reach it), written by the daemon only.
        clone = ["clone", "--bare", "--quiet", "--config", "core.sharedRepository=0644"]
        try:
            self.git.run([*clone, "--", url, str(bare)], timeout=TIMEOUT)
            self.git.run(["config", "remote.origin.fetch", FETCH_REFSPEC], cwd=bare)
            self.fetch(bare)
        except GitError:
            shutil.rmtree(bare, ignore_errors=True)  # a half-made cache would pass for one
            raise
        log.info("repo cache: cloned %s in %.1fs", redact(url), time.monotonic() - started)

    def mark_used(self, bare: Path) -> None:
        """Stamp the cache as wanted now, before the checkout's work, as Go does: a fetch at
        start-up touches every cache, so only this stamp says a task still uses it."""
        try:
            write_atomic(bare / LAST_USED, utc_iso(precision="microseconds"), durable=False)
        except OSError as exc:
            log.warning("repo cache: cannot stamp %s as used: %s", bare.name, exc)

    def fetch(self, bare: Path) -> None:
        """Fetch the remote's branches and tags, then learn its default branch again."""
        self.git.run(["fetch", "--quiet", "--prune", "origin"], cwd=bare, timeout=TIMEOUT)
        # Best effort: without it the default branch falls back to main/master/the only one.
        self.git.ok(["remote", "set-head", "origin", "--auto"], cwd=bare)

    def base_ref(self, bare: Path, wanted: str) -> str:
        """The ref a checkout starts from: `wanted` as a remote branch, tag or commit, else the
        remote's default branch. GitError when neither resolves."""
        if wanted:
            for candidate in (ORIGIN + wanted, "refs/tags/" + wanted, wanted):
                if self._is_commit(bare, candidate):
                    return candidate
            raise GitError(f"cannot resolve the requested ref {wanted!r} in the repository")
        default = self._default_branch(bare)
        if not default:
            raise GitError(
                "cannot tell the repository's default branch: its cache has no usable refs"
            )
        return default

    def _default_branch(self, bare: Path) -> str:
        """As Go resolves it: origin/HEAD, origin/main, origin/master, the bare HEAD's name
        under origin/, the only origin/ branch; never a guess among several."""
        head = self._symref(bare, ORIGIN + "HEAD")
        if head and self._is_commit(bare, head):
            return head
        for name in ("main", "master"):
            if self._is_commit(bare, ORIGIN + name):
                return ORIGIN + name
        local = self._symref(bare, "HEAD")
        if local.startswith("refs/heads/"):
            mapped = ORIGIN + local.removeprefix("refs/heads/")
            if self._is_commit(bare, mapped):
                return mapped
        listed = self.git.run(["for-each-ref", "--format=%(refname)", ORIGIN], cwd=bare).split()
        branches = [ref for ref in listed if ref != ORIGIN + "HEAD"]
        return branches[0] if len(branches) == 1 else ""

    def _symref(self, bare: Path, name: str) -> str:
        try:
            return self.git.run(["symbolic-ref", "--quiet", name], cwd=bare)
        except GitError:
            return ""

    def _is_commit(self, bare: Path, ref: str) -> bool:
        return self.git.ok(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", ref + "^{commit}"], cwd=bare
        )


class _Held:
    """A cache lock taken for one `with` block, waiting at most `wait` seconds (None: forever)."""

    def __init__(self, lock: threading.Lock, wait: float | None) -> None:
        self._lock, self._wait = lock, wait

    def __enter__(self) -> None:
        taken = self._lock.acquire() if self._wait is None else self._lock.acquire(True, self._wait)
        if not taken:
            raise RepoBusyError("the repository is busy with another operation")

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
