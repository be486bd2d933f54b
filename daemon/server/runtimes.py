"""The workspaces and runtimes half of the reference server's storage."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from typing import Any

from daemon.server import records
from daemon.server.bodies import RuntimeIn
from daemon.server.database import IN_FLIGHT, ConflictError, Database, NotFoundError, marks


class Runtimes(Database):
    """Workspaces, and the runtimes daemons register in them."""

    def workspaces(self) -> list[dict[str, Any]]:
        """Every workspace, oldest first."""
        with self._tx("DEFERRED") as conn:
            rows = conn.execute("SELECT id, name FROM workspaces ORDER BY created_at, id")
            return [{"id": r["id"], "name": r["name"]} for r in rows]

    def add_workspace(self, name: str, workspace_id: str = "") -> dict[str, Any]:
        """Create a workspace (a fresh id unless one is given); a taken id is a conflict."""
        workspace_id = workspace_id or str(uuid.uuid4())
        with self._tx() as conn:
            try:
                conn.execute(
                    "INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, ?)",
                    (workspace_id, name, self._clock()),
                )
            except sqlite3.IntegrityError:
                raise ConflictError("workspace already exists") from None
        return {"id": workspace_id, "name": name}

    def register(
        self,
        *,
        daemon_id: str,
        workspace_id: str,
        runtimes: Sequence[RuntimeIn],
        device_name: str = "",
        cli_version: str = "",
    ) -> list[dict[str, Any]]:
        """Create or refresh one runtime per (daemon, workspace, type); ids survive re-registers.

        Runtimes this daemon registered earlier in the workspace but no longer offers go
        offline, so nothing is dispatched to a backend the machine has lost.
        """
        now = self._clock()
        with self._tx() as conn:
            if (
                conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
                is None
            ):
                raise NotFoundError("workspace not found")
            rows = []
            for spec in runtimes:
                conn.execute(
                    """INSERT INTO runtimes (id, daemon_id, workspace_id, type, name, version,
                           status, device_name, cli_version, registered_at, last_seen_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                       ON CONFLICT (daemon_id, workspace_id, type) DO UPDATE SET
                           name = excluded.name, version = excluded.version,
                           status = excluded.status, device_name = excluded.device_name,
                           cli_version = excluded.cli_version,
                           last_seen_at = excluded.last_seen_at""",
                    (
                        str(uuid.uuid4()),
                        daemon_id,
                        workspace_id,
                        spec.type,
                        spec.name or spec.type,
                        spec.version,
                        spec.status or "online",
                        device_name,
                        cli_version,
                        now,
                        now,
                    ),
                )
                rows.append(
                    conn.execute(
                        """SELECT * FROM runtimes
                           WHERE daemon_id = ? AND workspace_id = ? AND type = ?""",
                        (daemon_id, workspace_id, spec.type),
                    ).fetchone()
                )
            kept = [r["id"] for r in rows]
            conn.execute(
                f"""UPDATE runtimes SET status = 'offline'
                    WHERE daemon_id = ? AND workspace_id = ? AND id NOT IN ({marks(kept)})""",
                (daemon_id, workspace_id, *kept),
            )
            return [records.runtime_summary(r) for r in rows]

    def heartbeat(self, runtime_id: str) -> None:
        """Record that the runtime is alive now."""
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE runtimes SET last_seen_at = ?, status = 'online' WHERE id = ?",
                (self._clock(), runtime_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError("runtime not found")

    def deregister(self, runtime_ids: Sequence[str]) -> int:
        """Mark the runtimes offline; returns how many the server knew."""
        with self._tx() as conn:
            cur = conn.execute(
                f"UPDATE runtimes SET status = 'offline' WHERE id IN ({marks(runtime_ids)})",
                tuple(runtime_ids),
            )
            return cur.rowcount

    def runtimes(self) -> list[dict[str, Any]]:
        """Every runtime with its last heartbeat, in registration order."""
        with self._tx("DEFERRED") as conn:
            rows = conn.execute("SELECT * FROM runtimes ORDER BY registered_at, id")
            return [records.runtime_view(r) for r in rows]

    def recover_orphans(self, runtime_id: str) -> int:
        """Fail the runtime's in-flight tasks (its daemon restarted); returns how many."""
        now = self._clock()
        with self._tx() as conn:
            if (
                conn.execute("SELECT 1 FROM runtimes WHERE id = ?", (runtime_id,)).fetchone()
                is None
            ):
                raise NotFoundError("runtime not found")
            cur = conn.execute(
                f"""UPDATE tasks SET status = 'failed', failure_reason = 'runtime_recovery',
                        error = 'the daemon restarted while the task was in flight',
                        finished_at = ?
                    WHERE runtime_id = ? AND status IN ({marks(IN_FLIGHT)})""",
                (now, runtime_id, *IN_FLIGHT),
            )
            return cur.rowcount

    def _refuse_unserved(self, conn: sqlite3.Connection, workspace_id: str, backend: str) -> None:
        """Refuse a task for a backend no online runtime serves while others are online: it would
        wait forever. With no runtime online, a daemon may still come, so the task is queued."""
        served = sorted(
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT type FROM runtimes WHERE workspace_id = ? AND status = 'online'",
                (workspace_id,),
            )
        )
        if served and backend not in served:
            raise ConflictError(
                f"no runtime serves backend {backend!r} in workspace {workspace_id!r}; "
                f"available: {', '.join(served)}"
            )
