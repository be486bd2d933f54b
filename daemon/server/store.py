"""The reference server's storage: tasks, their claims, transcripts and usage, over SQLite.

`Store` is the whole storage (workspaces and runtimes come from `Runtimes`); see
`daemon.server.database` for how it stays consistent under concurrent claims.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Sequence
from typing import Any

from daemon.server import records
from daemon.server.bodies import AgentIn, MessageIn, UsageEntryIn
from daemon.server.database import ConflictError, NotFoundError, marks
from daemon.server.runtimes import Runtimes
from daemon.statuses import TERMINAL_STATUSES

__all__ = ["ConflictError", "NotFoundError", "Store"]

MAX_CLAIM = 1000
"""The most tasks one claim hands out, whatever `max_tasks` asks for."""


class Store(Runtimes):
    """All reads and writes of the reference server, each one a short SQLite transaction."""

    # -- claiming ----------------------------------------------------------------------------

    def claim(
        self, daemon_id: str, runtime_ids: Sequence[str], max_tasks: int
    ) -> list[dict[str, Any]]:
        """Hand up to `max_tasks` queued tasks, oldest first, to the daemon; each one only once.

        A task goes to the first listed runtime of its workspace whose type is the task's
        backend (any runtime of the workspace when the task names no backend).
        """
        limit = min(max_tasks, MAX_CLAIM)
        now = self._clock()
        with self._tx() as conn:
            wanted = list(dict.fromkeys(runtime_ids))
            found = {
                r["id"]: r
                for r in conn.execute(
                    f"SELECT * FROM runtimes WHERE id IN ({marks(wanted)})", tuple(wanted)
                )
            }
            if len(found) < len(wanted):
                raise NotFoundError("runtime not found")
            if limit <= 0 or not wanted:
                return []
            order = [found[i] for i in wanted]
            match = " OR ".join(
                ["(workspace_id = ? AND (backend IS NULL OR backend = ?))"] * len(order)
            )
            params: list[Any] = [v for r in order for v in (r["workspace_id"], r["type"])]
            queued = conn.execute(
                f"SELECT * FROM tasks WHERE status = 'queued' AND ({match}) ORDER BY n LIMIT ?",
                (*params, limit),
            ).fetchall()
            claimed = []
            for task in queued:
                runtime = next(
                    r
                    for r in order
                    if r["workspace_id"] == task["workspace_id"]
                    and task["backend"] in (None, r["type"])
                )
                conn.execute(
                    """UPDATE tasks SET status = 'dispatched', runtime_id = ?, claimed_by = ?,
                           claimed_at = ?, auth_token = ?
                       WHERE id = ? AND status = 'queued'""",
                    (runtime["id"], daemon_id, now, secrets.token_urlsafe(32), task["id"]),
                )
                claimed.append(
                    records.claimed_task(self._task_row(conn, task["id"]), runtime["type"])
                )
            return claimed

    # -- tasks -------------------------------------------------------------------------------

    def create_task(
        self,
        prompt: str,
        *,
        backend: str | None = None,
        workspace_id: str = "default",
        agent: AgentIn | None = None,
        prior_session_id: str = "",
    ) -> dict[str, Any]:
        """Queue a new task and return it."""
        task_id = str(uuid.uuid4())
        agent_json = json.dumps((agent or AgentIn()).model_dump())
        with self._tx() as conn:
            if (
                conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
                is None
            ):
                raise NotFoundError("workspace not found")
            conn.execute(
                """INSERT INTO tasks (id, workspace_id, backend, prompt, agent, prior_session_id,
                       status, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, 'queued', ?)""",
                (
                    task_id,
                    workspace_id,
                    backend or None,
                    prompt,
                    agent_json,
                    prior_session_id,
                    self._clock(),
                ),
            )
            return records.task_view(self._task_row(conn, task_id))

    def task(self, task_id: str) -> dict[str, Any]:
        """One task as the extensions show it."""
        with self._tx("DEFERRED") as conn:
            return records.task_view(self._task_row(conn, task_id))

    def tasks(self, status: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        """Tasks, oldest first, optionally only those in one status."""
        with self._tx("DEFERRED") as conn:
            if status is None:
                rows = conn.execute("SELECT * FROM tasks ORDER BY n LIMIT ?", (limit,))
            else:
                rows = conn.execute(
                    "SELECT * FROM tasks WHERE status = ? ORDER BY n LIMIT ?", (status, limit)
                )
            return [records.task_view(r) for r in rows]

    def status(self, task_id: str) -> str:
        """The task's current status."""
        with self._tx("DEFERRED") as conn:
            return str(self._task_row(conn, task_id)["status"])

    def start(self, task_id: str) -> str:
        """Mark a claimed task running; a repeat, or starting a finished task, changes nothing."""
        with self._tx() as conn:
            row = self._task_row(conn, task_id)
            if row["status"] == "queued":
                raise ConflictError("task is not claimed")
            if row["status"] != "dispatched":
                return str(row["status"])
            conn.execute(
                "UPDATE tasks SET status = 'running', started_at = ? WHERE id = ?",
                (self._clock(), task_id),
            )
            return "running"

    def complete(
        self, task_id: str, output: str, session_id: str = "", work_dir: str = ""
    ) -> dict[str, Any]:
        """Finish the task as completed; a task already finished is left as it is."""
        return self._finish(
            task_id,
            "complete_calls",
            "status = 'completed', output = ?, session_id = ?, work_dir = ?",
            (output, session_id or None, work_dir or None),
        )

    def fail(
        self,
        task_id: str,
        error: str,
        failure_reason: str = "",
        session_id: str = "",
        work_dir: str = "",
    ) -> dict[str, Any]:
        """Finish the task as failed; a task already finished is left as it is."""
        return self._finish(
            task_id,
            "fail_calls",
            "status = 'failed', error = ?, failure_reason = ?, session_id = ?, work_dir = ?",
            (error, failure_reason or "agent_error", session_id or None, work_dir or None),
        )

    def _finish(
        self, task_id: str, counter: str, assignments: str, values: tuple[Any, ...]
    ) -> dict[str, Any]:
        with self._tx() as conn:
            row = self._task_row(conn, task_id)
            if row["status"] == "queued":
                raise ConflictError("task is not claimed")
            # Every report is counted, even a no-op repeat, so tests can see duplicates.
            conn.execute(f"UPDATE tasks SET {counter} = {counter} + 1 WHERE id = ?", (task_id,))
            if row["status"] not in TERMINAL_STATUSES:
                conn.execute(
                    f"UPDATE tasks SET {assignments}, finished_at = ? WHERE id = ?",
                    (*values, self._clock(), task_id),
                )
            return records.task_view(self._task_row(conn, task_id))

    def cancel(self, task_id: str) -> dict[str, Any]:
        """Cancel the task unless it already finished; the daemon notices on its next poll."""
        with self._tx() as conn:
            conn.execute(
                f"""UPDATE tasks SET status = 'cancelled', finished_at = ?
                    WHERE id = ? AND status NOT IN ({marks(TERMINAL_STATUSES)})""",
                (self._clock(), task_id, *TERMINAL_STATUSES),
            )
            return records.task_view(self._task_row(conn, task_id))

    def cancel_ack(self, task_id: str) -> None:
        """Record that the daemon honoured a cancel (the first acknowledgement's time is kept)."""
        with self._tx() as conn:
            self._task_row(conn, task_id)
            conn.execute(
                "UPDATE tasks SET cancel_acked_at = COALESCE(cancel_acked_at, ?) WHERE id = ?",
                (self._clock(), task_id),
            )

    # -- transcript and usage ------------------------------------------------------------------

    def add_messages(self, task_id: str, messages: Sequence[MessageIn]) -> int:
        """Store the messages once per (task, seq); returns how many were new."""
        now = self._clock()
        with self._tx() as conn:
            self._task_row(conn, task_id)
            before = conn.total_changes
            conn.executemany(
                """INSERT OR IGNORE INTO messages
                       (task_id, seq, type, tool, content, input, output, received_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                [
                    (
                        task_id,
                        m.seq,
                        m.type,
                        m.tool,
                        m.content,
                        None if m.input is None else json.dumps(m.input),
                        m.output,
                        now,
                    )
                    for m in messages
                ],
            )
            return conn.total_changes - before

    def messages(self, task_id: str, after_seq: int | None = None) -> list[dict[str, Any]]:
        """The task's transcript in seq order, optionally only past `after_seq`."""
        with self._tx("DEFERRED") as conn:
            self._task_row(conn, task_id)
            rows = conn.execute(
                "SELECT * FROM messages WHERE task_id = ? AND (? IS NULL OR seq > ?) ORDER BY seq",
                (task_id, after_seq, after_seq),
            )
            return [records.message_view(r) for r in rows]

    def record_usage(self, task_id: str, entries: Sequence[UsageEntryIn]) -> None:
        """Store usage per (provider, model); a later report replaces an earlier one, as totals."""
        now = self._clock()
        with self._tx() as conn:
            self._task_row(conn, task_id)
            for e in entries:
                conn.execute(
                    "INSERT OR REPLACE INTO usage VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        task_id,
                        e.provider,
                        e.model,
                        e.input_tokens,
                        e.output_tokens,
                        e.cache_read_tokens,
                        e.cache_write_tokens,
                        now,
                    ),
                )

    def usage(self, task_id: str) -> list[dict[str, Any]]:
        """The task's usage entries."""
        with self._tx("DEFERRED") as conn:
            self._task_row(conn, task_id)
            rows = conn.execute(
                "SELECT * FROM usage WHERE task_id = ? ORDER BY provider, model", (task_id,)
            )
            return [records.usage_view(r) for r in rows]
