"""The daemon's repositories: what each workspace offers, their caches, each task's checkouts.

`Workdirs` is what the rest of the daemon talks to. Registration tells it a workspace's
repositories (`learned`), and their caches are cloned in the background; a task's run opens
a window (`task_window`) in which its agent's token may ask the health port for a checkout;
`serve` runs beside the worker, owning the background clones and the portal through which a
request thread asks the server for a workspace's current list.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from anyio.from_thread import BlockingPortal

from backends.process.identity import AgentUser
from daemon.errors import DaemonError, GitError
from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.protocol.models import RepoRef, Task
from daemon.protocol.runtime_models import WorkspaceRepos
from daemon.workdirs.cache import RepoCache
from daemon.workdirs.catalog import ActiveTask, RepoCatalog
from daemon.workdirs.coauthor import place_hook
from daemon.workdirs.git import Git, check_url, redact
from daemon.workdirs.names import branch_name, repo_name
from daemon.workdirs.worktree import Checkout, check_out

log = logging.getLogger(__name__)

REFRESH_WITHIN = 30.0
"""Seconds a checkout waits for the server's repository list (Go's refresh timeout)."""

Refresh = Callable[[str], Awaitable[WorkspaceRepos]]
"""Asks the server for one workspace's repository list."""


class NotConfiguredError(DaemonError):
    """The URL is not one of the workspace's or its tasks' repositories (a 400)."""


class Workdirs:
    """Repository caches and per-task checkouts under one workspaces root."""

    def __init__(
        self,
        workspaces_root: Path,
        base_env: Mapping[str, str],
        refresh: Refresh,
        metrics: Metrics | None = None,
        *,
        shared: bool = False,
    ) -> None:
        """`shared`: agents run as users of their own (MULTICA_AGENT_USER), so the caches are
        made readable to them; which user makes a checkout is its task's (`task_window`)."""
        self.metrics = metrics
        self.git = Git(base_env)
        self.cache = RepoCache(workspaces_root, self.git, shared=shared)
        self.catalog = RepoCatalog()
        self._refresh = refresh
        self._portal: BlockingPortal | None = None
        self._pending: list[tuple[str, list[str]]] = []
        self._wake = anyio.Event()
        self._told_missing = False

    # --- the event loop's side -----------------------------------------------------------

    async def serve(self) -> None:
        """Clone and fetch in the background and lend the loop to request threads, until
        cancelled; every git still running is killed on the way out."""
        try:
            async with BlockingPortal() as portal, anyio.create_task_group() as tg:
                self._portal = portal
                while True:
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    pending, self._pending = self._pending, []
                    for workspace_id, urls in pending:
                        tg.start_soon(self._sync, workspace_id, urls)
        finally:
            self._portal = None
            self.git.stop()

    def learned(
        self, workspace_id: str, repos: list[RepoRef], settings: dict[str, Any] | None = None
    ) -> None:
        """The server named the workspace's repositories (register): allow and cache them; its
        settings, when it sent any, are the workspace's now."""
        if settings:
            self.catalog.set_settings(workspace_id, settings)
        urls = self.catalog.set_workspace(workspace_id, repos)
        if urls:
            self._background(workspace_id, urls)

    def listed(self, bare: Path) -> bool:
        """Whether a served workspace still lists the repository cached at `bare`: the GC
        never evicts such a cache (the next start would clone it again)."""
        return any(self.cache.bare_path(ws, url) == bare for ws, url in self.catalog.listed())

    @contextmanager
    def task_window(
        self, task: Task, work_dir: Path, user: AgentUser | None = None
    ) -> Iterator[None]:
        """While the agent runs, its token may check out the workspace's and task's repos;
        `user` is the agent user it runs as (one of a pool), whose git makes them."""
        urls = self.catalog.add_task(task)
        missing = [u for u in urls if not self.cache.is_cached(task.workspace_id, u)]
        if missing:
            self._background(task.workspace_id, missing)
        token = task.auth_token.strip()
        active = ActiveTask(task.workspace_id, task.id, task.agent.name, work_dir, user)
        if token:
            self.catalog.start(token, active)
        try:
            yield
        finally:
            self.catalog.end(token, task.id)

    def _background(self, workspace_id: str, urls: list[str]) -> None:
        safe = [u for u in urls if check_url(u) is None]
        if not self.git.available:
            if not self._told_missing:
                self._told_missing = True
                log.error(
                    "git is not installed: workspace %s has %d repositories, and agents cannot "
                    "check them out until git is on the PATH",
                    workspace_id,
                    len(urls),
                )
            return
        self._pending.append((workspace_id, safe))
        self._wake.set()

    async def _sync(self, workspace_id: str, urls: list[str]) -> None:
        error = await anyio.to_thread.run_sync(
            self.cache.sync, workspace_id, urls, abandon_on_cancel=True
        )
        if not error:
            log.info("repo cache: workspace %s: %d repositories ready", workspace_id, len(urls))

    # --- the request thread's side --------------------------------------------------------

    def ensure_allowed(self, workspace_id: str, url: str) -> None:
        """Return when `url` may be checked out in the workspace; NotConfiguredError when it may
        not. The server is asked for the workspace's list and settings first, as Go's daemon
        asks before every checkout: a setting changed in the web UI counts from the next
        checkout on. When asking fails, a URL already allowed is checked out with what is known."""
        known = self.catalog.allowed(workspace_id, url)
        try:
            portal = self._portal
            if portal is None:
                raise DaemonError("the daemon is not serving yet")
            answer = portal.call(_bounded, self._refresh, workspace_id)
        except (DaemonError, TimeoutError) as exc:
            if known:
                log.warning(
                    "repo checkout: workspace %s not refreshed (%s); going on with what is known",
                    workspace_id,
                    exc or "timed out",
                )
                return
            raise DaemonError(f"refresh workspace repos: {exc or 'timed out'}") from exc
        self.catalog.set_workspace(workspace_id, answer.repos)
        self.catalog.set_settings(workspace_id, answer.settings)
        if not self.catalog.allowed(workspace_id, url):
            raise NotConfiguredError("repo is not configured for this workspace")

    def check_out(
        self,
        task: ActiveTask,
        url: str,
        ref: str,
        work_dir: Path,
        wait: float,
        *,
        isolated: bool = False,
    ) -> Checkout:
        """The task's checkout of `url` in `work_dir`, on its branch, from `ref` or the claim's
        ref or the default branch; RepoBusyError when the cache stays locked past `wait`."""
        bare = self.cache.bare_path(task.workspace_id, url)
        wanted = ref or self.catalog.task_ref(task.task_id, url)
        with self.cache.locked(bare, wait):
            cached = self.cache.is_cached(task.workspace_id, url)
            try:
                self.cache.ensure(bare, url)
            except GitError as exc:
                if not cached:
                    raise
                # As Go: the agent gets the code as last fetched, and the log says so.
                log.warning(
                    "repo checkout: fetch failed, code may be stale: %s: %s", redact(url), exc
                )
            self.cache.mark_used(bare)
            base = self.cache.base_ref(bare, wanted)
            branch = branch_name(task.agent_name, task.task_id)
            path = work_dir / repo_name(url)
            # As the task's own user: each task of a pool runs as another uid, and only that
            # uid may enter the work dir, own the checkout and remove a failed one.
            done = check_out(
                self.git, bare, url, path, branch, base, isolated=isolated, user=task.user
            )
            owner = task.user.owner if task.user else None
            on = self.catalog.co_authored(task.workspace_id)
            place_hook(task.work_dir.parent, done.path, bare, on, owner)
        log.info(
            "task %s: checked out %s at %s on %s%s",
            short_id(task.task_id),
            redact(url),
            done.path,
            done.branch,
            " (kept as it was)" if done.kept else f" from {base}",
        )
        return done


async def _bounded(refresh: Refresh, workspace_id: str) -> WorkspaceRepos:
    with anyio.fail_after(REFRESH_WITHIN):
        return await refresh(workspace_id)
