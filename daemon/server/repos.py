"""The repositories half of the reference server's storage: each workspace's list, each task's.

As Multica's server has them: a workspace's repositories come with every register answer and
from `GET /api/daemon/workspaces/{id}/repos`; a claimed task carries its own (`submit --repo`),
else its workspace's, so the daemon lets the agent check them out.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from typing import Any

from daemon.server.bodies import RepoIn
from daemon.server.database import Database, NotFoundError


def repos_version(repos: Sequence[dict[str, Any]]) -> str:
    """Go's `workspaceReposVersion`: a hash of the sorted URLs."""
    urls = "\n".join(sorted(r["url"] for r in repos))
    return hashlib.sha256(urls.encode()).hexdigest()


class Repos(Database):
    """Repository lists of workspaces and tasks."""

    def set_workspace_repos(self, workspace_id: str, urls: Sequence[str]) -> None:
        """Replace the workspace's repository list (duplicates and blanks dropped)."""
        kept = list(dict.fromkeys(u.strip() for u in urls if u.strip()))
        with self._tx() as conn:
            conn.execute("DELETE FROM workspace_repos WHERE workspace_id = ?", (workspace_id,))
            conn.executemany(
                "INSERT INTO workspace_repos (workspace_id, position, url) VALUES (?, ?, ?)",
                [(workspace_id, n, url) for n, url in enumerate(kept)],
            )

    def workspace_repos(self, workspace_id: str) -> dict[str, Any]:
        """Go's `daemonWorkspaceReposResponse` for the workspace; 404 for an unknown one."""
        with self._tx("DEFERRED") as conn:
            if (
                conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
                is None
            ):
                raise NotFoundError("workspace not found")
            repos = self._workspace_list(conn, workspace_id)
        return {"workspace_id": workspace_id, "repos": repos, "repos_version": repos_version(repos)}

    @staticmethod
    def _workspace_list(conn: sqlite3.Connection, workspace_id: str) -> list[dict[str, Any]]:
        rows = conn.execute(
            "SELECT url FROM workspace_repos WHERE workspace_id = ? ORDER BY position",
            (workspace_id,),
        )
        return [{"url": r["url"], "description": ""} for r in rows]

    @staticmethod
    def _add_task_repos(conn: sqlite3.Connection, task_id: str, repos: Sequence[RepoIn]) -> None:
        conn.executemany(
            "INSERT INTO task_repos (task_id, position, url, ref) VALUES (?, ?, ?, ?)",
            [(task_id, n, r.url.strip(), r.ref.strip()) for n, r in enumerate(repos)],
        )

    def _claim_repos(self, conn: sqlite3.Connection, task: sqlite3.Row) -> list[dict[str, Any]]:
        """The task's own repositories, else its workspace's (Go's precedence for a project)."""
        rows = conn.execute(
            "SELECT url, ref FROM task_repos WHERE task_id = ? ORDER BY position", (task["id"],)
        ).fetchall()
        if rows:
            return [{"url": r["url"], "ref": r["ref"]} for r in rows]
        return self._workspace_list(conn, task["workspace_id"])
