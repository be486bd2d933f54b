"""The reference server's storage: tasks, their claims, transcripts and usage, over SQLite.

`Store` is the whole storage (workspaces and runtimes come from `Runtimes`, messages and usage
from `Transcripts`); see `daemon.server.database` for how it stays consistent under concurrent
claims.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from daemon.protocol.failure_text import classify
from daemon.protocol.models import TERMINAL_STATUSES
from daemon.server import records
from daemon.server.bodies import AgentIn, RepoIn
from daemon.server.database import (
    IN_FLIGHT,
    ConflictError,
    NotFoundError,
    StateError,
    marks,
)
from daemon.server.repos import Repos
from daemon.server.retries import FINAL_RETRY_WAIT, resume_from, retry
from daemon.server.runtimes import Runtimes
from daemon.server.transcripts import Transcripts
from daemon.times import parse_utc, utc_iso

__all__ = ["ConflictError", "NotFoundError", "StateError", "Store"]

MAX_CLAIM = 32
"""The most tasks one claim hands out, whatever `max_tasks` asks for (Multica's
`claimBatchMaxTasksCap`)."""

RECLAIM_AFTER = 90.0
"""Seconds after which a dispatched task nobody started is handed out again (Multica's
`claimResponseRecoveryWindow`): the daemon that claimed it never read the answer."""

MAX_PAGE = 500
"""The most tasks one `GET /api/tasks` page holds."""


def task_token() -> str:
    """A task's agent token, shaped like Multica's (`mat_` and 40 hex digits): the Multica CLI
    inside a task refuses a token without that prefix."""
    return "mat_" + secrets.token_hex(20)


class Store(Runtimes, Transcripts, Repos):
    """All reads and writes of the reference server, each one a short SQLite transaction."""

    retry_wait = FINAL_RETRY_WAIT
    """Seconds the last retry of a transient provider failure waits."""

    # -- claiming ----------------------------------------------------------------------------

    def claim(
        self, daemon_id: str, runtime_ids: Sequence[str], max_tasks: int
    ) -> list[dict[str, Any]]:
        """Hand up to `max_tasks` queued tasks, oldest first, to the daemon; each one only once.

        A task goes to the first listed runtime of its workspace whose type is the task's
        backend (any runtime of the workspace when the task names no backend). As in Multica's
        `ClaimTasksByRuntime`, unknown runtime ids and another daemon's runtimes are skipped,
        never an error, so one stale id cannot sink the whole claim; and a task this daemon's
        runtimes were handed `RECLAIM_AFTER` ago and never started (the claim's answer was
        lost) is handed out again first, as Multica's `ReclaimStaleDispatchedTasksForRuntimes`.
        """
        limit = min(max_tasks, MAX_CLAIM)
        now = self._clock()
        with self._tx() as conn:
            wanted = list(dict.fromkeys(runtime_ids))
            found = {
                r["id"]: r
                for r in conn.execute(
                    f"SELECT * FROM runtimes WHERE id IN ({marks(wanted)}) AND daemon_id = ?",
                    (*wanted, daemon_id),
                )
            }
            order = [found[i] for i in wanted if i in found]
            if limit <= 0 or not order:
                return []
            claimed = self._reclaim(conn, daemon_id, order, now, limit)
            limit -= len(claimed)
            match = " OR ".join(
                ["(workspace_id = ? AND (backend IS NULL OR backend = ?))"] * len(order)
            )
            params: list[Any] = [v for r in order for v in (r["workspace_id"], r["type"])]
            # A deferred retry (`fire_at`) waits for its time, as Multica's deferred tasks do.
            queued = conn.execute(
                f"""SELECT * FROM tasks WHERE status = 'queued' AND ({match})
                        AND (fire_at IS NULL OR fire_at <= ?) ORDER BY n LIMIT ?""",
                (*params, now, limit),
            ).fetchall()
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
                    (runtime["id"], daemon_id, now, task_token(), task["id"]),
                )
                row = self._task_row(conn, task["id"])
                repos = self._claim_repos(conn, row)
                claimed.append(records.claimed_task(row, runtime["type"], repos))
            return claimed

    def _reclaim(
        self,
        conn: sqlite3.Connection,
        daemon_id: str,
        order: list[sqlite3.Row],
        now: str,
        limit: int,
    ) -> list[dict[str, Any]]:
        """The tasks dispatched to these runtimes `RECLAIM_AFTER` ago and never started, again."""
        moment = parse_utc(now)
        if moment is None:
            return []
        cutoff = utc_iso(moment.timestamp() - RECLAIM_AFTER, "microseconds")
        types = {r["id"]: r["type"] for r in order}
        stale = conn.execute(
            f"""SELECT * FROM tasks WHERE status = 'dispatched' AND claimed_by = ?
                    AND runtime_id IN ({marks(list(types))}) AND claimed_at < ?
                    ORDER BY n LIMIT ?""",
            (daemon_id, *types, cutoff, limit),
        ).fetchall()
        again = []
        for task in stale:
            conn.execute("UPDATE tasks SET claimed_at = ? WHERE id = ?", (now, task["id"]))
            row = self._task_row(conn, task["id"])
            repos = self._claim_repos(conn, row)
            again.append(records.claimed_task(row, types[task["runtime_id"]], repos))
        return again

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
