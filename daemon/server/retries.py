"""The reference server's automatic retry of a transient provider failure, as Multica's.

Multica's `FailTask` retries `agent_error.provider_network` (a stream cut mid-response) with
three attempts in all: the first retry at once, the last after about five seconds
(`retryAttemptCeiling`, `retryDelayForAttempt`). The retry is a new queued task that resumes
the failed run's session in its work directory, unless the failure poisoned that session
(`resume_unsafe`: Multica's resume rule), in which case it starts afresh.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

from daemon.protocol.failure_text import resume_unsafe
from daemon.times import utc_iso

RETRIED = {"agent_error.provider_network": 3}
"""Retried reasons → the attempts they get in all (Multica's `providerNetworkMaxAttempts`)."""
FINAL_RETRY_WAIT = 5.0
"""Seconds the last attempt waits (Multica's `providerNetworkFinalRetryWait`)."""


def resume_from(row: sqlite3.Row) -> tuple[str, str]:
    """The (session, work dir) a follow-up of this finished task may resume: the session
    only when its failure left it resumable, the work dir always."""
    safe = not resume_unsafe(row["failure_reason"] or "", row["error"] or "")
    return (row["session_id"] or "") if safe else "", row["work_dir"] or ""


def retry(conn: sqlite3.Connection, row: sqlite3.Row, now: str, wait: float) -> dict[str, Any]:
    """Queue the next attempt of the failed task `row` when its reason is retried and attempts
    are left; the new task's id and when it may be claimed ({} when none is queued).

    `wait` is the last attempt's delay in seconds; it is measured on the wall clock.
    """
    ceiling = RETRIED.get(row["failure_reason"] or "", 0)
    if row["attempt"] >= ceiling:
        return {}
    session, work_dir = resume_from(row)
    last = row["attempt"] + 1 >= ceiling
    fire_at = utc_iso(time.time() + wait, "microseconds") if last and wait > 0 else None
    child = str(uuid.uuid4())
    conn.execute(
        """INSERT INTO tasks (id, workspace_id, backend, prompt, agent, prior_session_id,
               prior_work_dir, attempt, max_attempts, parent_task_id, fire_at, status,
               created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?)""",
        (
            child,
            row["workspace_id"],
            row["backend"],
            row["prompt"],
            row["agent"],
            session,
            work_dir,
            row["attempt"] + 1,
            ceiling,
            row["id"],
            fire_at,
            now,
        ),
    )
    return {"id": child, "fire_at": fire_at}
