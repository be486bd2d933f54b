"""Which repositories each workspace may check out, its settings, and which task each agent
token belongs to.

A URL is allowed in a workspace when the server named it: in the register answer, in the
workspace's repository list (`GET /api/daemon/workspaces/{id}/repos`), or in a claimed task's
`repos` (a project's repositories, which the workspace list does not carry). A running task is
found by its own token only, so a request can never act for another task or workspace. Read
from the health port's request threads and written from the event loop: one lock guards all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.process.identity import AgentUser
from daemon.protocol.models import RepoRef, Task
from daemon.workdirs.coauthor import co_authored


@dataclass(frozen=True, slots=True)
class ActiveTask:
    """A task whose agent is running: who it is, the work dir its checkouts must stay in, and
    the agent user it runs as (None: the daemon's own), whose git makes its checkouts."""

    workspace_id: str
    task_id: str
    agent_name: str
    work_dir: Path
    user: AgentUser | None = None


class RepoCatalog:
    """Allowed URLs per workspace, the claim's refs per task, running tasks by token."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._workspace: dict[str, frozenset[str]] = {}
        self._from_tasks: dict[str, set[str]] = {}
        self._refs: dict[str, dict[str, str]] = {}
        self._active: dict[str, ActiveTask] = {}
        self._settings: dict[str, dict[str, Any] | None] = {}

    def set_workspace(self, workspace_id: str, repos: Iterable[RepoRef]) -> list[str]:
        """Replace the workspace's own list (the server's answer is the whole list); its URLs."""
        urls = _urls(repos)
        with self._lock:
            self._workspace[workspace_id] = frozenset(urls)
        return urls

    def set_settings(self, workspace_id: str, settings: dict[str, Any] | None) -> None:
        """The workspace's settings as the server has them now."""
        with self._lock:
            self._settings[workspace_id] = settings

    def co_authored(self, workspace_id: str) -> bool:
        """Whether the workspace's commits get the co-author trailer (coauthor.py)."""
        with self._lock:
            return co_authored(self._settings.get(workspace_id))

    def add_task(self, task: Task) -> list[str]:
        """Allow the task's repositories in its workspace and keep their refs; its URLs."""
        urls = _urls(task.repos)
        with self._lock:
            self._from_tasks.setdefault(task.workspace_id, set()).update(urls)
            refs = self._refs.setdefault(task.id, {})
            for repo in task.repos:
                refs.setdefault(repo.url.strip(), repo.ref.strip())
        return urls

    def allowed(self, workspace_id: str, url: str) -> bool:
        """True when the server named `url` for this workspace or one of its tasks."""
        with self._lock:
            return url in self._workspace.get(workspace_id, ()) or url in self._from_tasks.get(
                workspace_id, ()
            )

    def task_ref(self, task_id: str, url: str) -> str:
        """The ref the task's claim asked for this repository ('' for the default branch)."""
        with self._lock:
            return self._refs.get(task_id, {}).get(url, "")

    def listed(self) -> list[tuple[str, str]]:
        """(workspace, URL) of every repository a workspace's own list names now."""
        with self._lock:
            return [(ws, url) for ws, urls in self._workspace.items() for url in urls]

    def start(self, token: str, task: ActiveTask) -> None:
        """The task's agent runs: requests carrying its token act for it."""
        with self._lock:
            self._active[token] = task

    def end(self, token: str, task_id: str) -> None:
        """The task's agent has stopped: its token no longer opens anything."""
        with self._lock:
            self._active.pop(token, None)
            self._refs.pop(task_id, None)

    def active(self, token: str) -> ActiveTask | None:
        """The running task this token belongs to, if any."""
        with self._lock:
            return self._active.get(token) if token else None


def _urls(repos: Iterable[RepoRef]) -> list[str]:
    return list(dict.fromkeys(u for u in (r.url.strip() for r in repos) if u))
