"""The reference server's storage: tasks, their claims, transcripts and usage, over SQLite.

`Store` is the whole storage (workspaces and runtimes come from `Runtimes`, messages and usage
from `Transcripts`, claims from `Claims`); see `daemon.server.database` for how it stays
consistent under concurrent claims.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from daemon.protocol.failure_text import classify
from daemon.protocol.models import TERMINAL_STATUSES
from daemon.server import records
from daemon.server.bodies import AgentIn, RepoIn
from daemon.server.claims import Claims
from daemon.server.database import (
    IN_FLIGHT,
    ConflictError,
    NotFoundError,
    StateError,
    marks,
)
from daemon.server.retries import FINAL_RETRY_WAIT, resume_from, retry
from daemon.server.runtimes import Runtimes
from daemon.server.transcripts import Transcripts

__all__ = ["ConflictError", "NotFoundError", "StateError", "Store"]

MAX_PAGE = 500
"""The most tasks one `GET /api/tasks` page holds."""


class Store(Runtimes, Transcripts, Claims):
    """All reads and writes of the reference server, each one a short SQLite transaction."""

    retry_wait = FINAL_RETRY_WAIT
    """Seconds the last retry of a transient provider failure waits."""

    # -- tasks -------------------------------------------------------------------------------

    def create_task(
        self,
        prompt: str,
        *,
        backend: str | None = None,
        workspace_id: str = "default",
        agent: AgentIn | None = None,
        prior_session_id: str = "",
        only_served: bool = False,
        repos: Sequence[RepoIn] = (),
        rerun_of: str = "",
    ) -> dict[str, Any]:
        """Queue a new task and return it; `only_served` refuses a backend nobody serves.

        `rerun_of` continues a finished task: its work dir, and its session unless its failure
        poisoned it (Multica's rerun: the exact source task, never a guess).
        """
        task_id = str(uuid.uuid4())
        agent_json = json.dumps((agent or AgentIn()).model_dump())
        prior_work_dir = ""
        with self._tx() as conn:
            if (
                conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
                is None
            ):
                raise NotFoundError("workspace not found")
            if backend and only_served:
                self._refuse_unserved(conn, workspace_id, backend)
            if rerun_of:
                prior_session_id, prior_work_dir = resume_from(self._task_row(conn, rerun_of))
            conn.execute(
                """INSERT INTO tasks (id, workspace_id, backend, prompt, agent, prior_session_id,
                       prior_work_dir, status, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)""",
                (
                    task_id,
                    workspace_id,
                    backend or None,
                    prompt,
                    agent_json,
                    prior_session_id,
                    prior_work_dir,
                    self._clock(),
                ),
            )
            self._add_task_repos(conn, task_id, repos)
            return records.task_view(self._task_row(conn, task_id))

    def task(self, task_id: str) -> dict[str, Any]:
        """One task as the extensions show it, with its usage per model."""
        with self._tx("DEFERRED") as conn:
            view = records.task_view(self._task_row(conn, task_id))
        return {**view, "usage": self.usage(task_id)}

    def tasks(
        self, status: str | None = None, limit: int = MAX_PAGE, after: str | None = None
    ) -> list[dict[str, Any]]:
        """One page of tasks, oldest first: at most `limit` (capped at `MAX_PAGE`), only those
        queued after the task `after` when given, optionally only those in one status."""
        with self._tx("DEFERRED") as conn:
            start = 0 if after is None else int(self._task_row(conn, after)["n"])
            rows = conn.execute(
                """SELECT * FROM tasks WHERE n > ? AND (? IS NULL OR status = ?)
                   ORDER BY n LIMIT ?""",
                (start, status, status, max(0, min(limit, MAX_PAGE))),
            )
            return [records.task_view(r) for r in rows]

    def holder(self, task_id: str) -> str:
        """The daemon that claimed the task ("" while nobody has)."""
        with self._tx("DEFERRED") as conn:
            return str(self._task_row(conn, task_id)["claimed_by"] or "")

    def status(self, task_id: str) -> str:
        """The task's current status."""
        with self._tx("DEFERRED") as conn:
            return str(self._task_row(conn, task_id)["status"])

    def start(self, task_id: str) -> str:
        """Mark a dispatched task running; any other status is refused (`StateError`), as
        Multica's `StartTask` refuses it (a task cancelled meanwhile must not run)."""
        with self._tx() as conn:
            row = self._task_row(conn, task_id)
            if row["status"] != "dispatched":
                raise StateError(f"start task: the task is {row['status']}, not dispatched")
            conn.execute(
                "UPDATE tasks SET status = 'running', started_at = ? WHERE id = ?",
                (self._clock(), task_id),
            )
            return "running"

    def complete(
        self, task_id: str, output: str, session_id: str = "", work_dir: str = ""
    ) -> dict[str, Any]:
        """Finish a running task as completed; any other task is left as it is (Multica's
        `CompleteAgentTask` updates only `running` rows and answers the rest as already final)."""
        return self._finish(
            task_id,
            ("running",),
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
        """Fail a dispatched or running task; any other task is left as it is (Multica's
        `FailAgentTask`). An empty reason is classified from the error text, as Multica does,
        and a transient provider failure queues its retry in the same transaction (`retry`:
        the new task, in the answer)."""
        return self._finish(
            task_id,
            IN_FLIGHT,
            "fail_calls",
            "status = 'failed', error = ?, failure_reason = ?, session_id = ?, work_dir = ?",
            (error, failure_reason or classify(error), session_id or None, work_dir or None),
            then=lambda conn, row: retry(conn, row, self._clock(), self.retry_wait),
        )

    def _finish(
        self,
        task_id: str,
        allowed: tuple[str, ...],
        counter: str,
        assignments: str,
        values: tuple[Any, ...],
        then: Callable[[sqlite3.Connection, sqlite3.Row], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        with self._tx() as conn:
            row = self._task_row(conn, task_id)
            # Every report is counted, even a no-op repeat, so tests can see duplicates.
            conn.execute(f"UPDATE tasks SET {counter} = {counter} + 1 WHERE id = ?", (task_id,))
            followed: dict[str, Any] = {}
            if row["status"] in allowed:
                conn.execute(
                    f"UPDATE tasks SET {assignments}, finished_at = ? WHERE id = ?",
                    (*values, self._clock(), task_id),
                )
                if then is not None:
                    followed = then(conn, self._task_row(conn, task_id))
            view = records.task_view(self._task_row(conn, task_id))
            return {**view, "retry": followed} if followed else view

    def pin_session(self, task_id: str, session_id: str, work_dir: str) -> None:
        """Record a running agent's session and work dir (Multica's `UpdateAgentTaskSession`):
        what is not given is kept; a finished task's row is left alone (a late pin never
        contradicts its terminal report), except a cancelled one's empty session."""
        with self._tx() as conn:
            self._task_row(conn, task_id)
            conn.execute(
                """UPDATE tasks SET session_id = COALESCE(?, session_id),
                       work_dir = COALESCE(?, work_dir)
                   WHERE id = ? AND (status IN ('dispatched', 'running')
                                     OR (status = 'cancelled' AND session_id IS NULL))""",
                (session_id or None, work_dir or None, task_id),
            )

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
