"""Claims in the reference server's storage: queued tasks handed to a daemon's runtimes, each
once, and a task handed out but never started handed out again (Multica's claim semantics)."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence
from typing import Any

from daemon.server import records
from daemon.server.database import marks
from daemon.server.repos import Repos
from daemon.times import parse_utc, utc_iso

MAX_CLAIM = 32
"""The most tasks one claim hands out, whatever `max_tasks` asks for (Multica's
`claimBatchMaxTasksCap`)."""

RECLAIM_AFTER = 90.0
"""Seconds after which a dispatched task nobody started is handed out again (Multica's
`claimResponseRecoveryWindow`): the daemon that claimed it never read the answer..."""
PREPARE_LEASE = 45.0
"""... once its prepare lease, from the claim or its last renewal, ran out too (Multica's
`prepareLeaseDuration`): a daemon still setting the task up renews it."""


def task_token() -> str:
    """A task's agent token, shaped like Multica's (`mat_` and 40 hex digits): the Multica CLI
    inside a task refuses a token without that prefix."""
    return "mat_" + secrets.token_hex(20)


class Claims(Repos):
    """Handing out queued tasks (the claims' side of `Store`)."""

    def claim(
        self, daemon_id: str, runtime_ids: Sequence[str], max_tasks: int
    ) -> list[dict[str, Any]]:
        """Hand up to `max_tasks` queued tasks, oldest first, to the daemon; each one only once.

        A task goes to the first listed runtime of its workspace whose type is the task's
        backend (any runtime of the workspace when the task names no backend). As in Multica's
        `ClaimTasksByRuntime`, unknown runtime ids and another daemon's runtimes are skipped,
        never an error, so one stale id cannot sink the whole claim; and a task this daemon's
        runtimes were handed `RECLAIM_AFTER` ago and never started, its prepare lease run out
        (the claim's answer was lost), is handed out again first, as Multica's
        `ReclaimStaleDispatchedTasksForRuntimes`.
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
                           claimed_at = ?, lease_until = ?, auth_token = ?
                       WHERE id = ? AND status = 'queued'""",
                    (runtime["id"], daemon_id, now, _later(now), task_token(), task["id"]),
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
        """The tasks dispatched to these runtimes `RECLAIM_AFTER` ago, never started and out
        of their prepare lease, again (each with a new lease)."""
        cutoff = _later(now, -RECLAIM_AFTER)
        types = {r["id"]: r["type"] for r in order}
        stale = conn.execute(
            f"""SELECT * FROM tasks WHERE status = 'dispatched' AND claimed_by = ?
                    AND runtime_id IN ({marks(list(types))}) AND claimed_at < ?
                    AND (lease_until IS NULL OR lease_until < ?) ORDER BY n LIMIT ?""",
            (daemon_id, *types, cutoff, now, limit),
        ).fetchall()
        again = []
        for task in stale:
            conn.execute(
                "UPDATE tasks SET claimed_at = ?, lease_until = ? WHERE id = ?",
                (now, _later(now), task["id"]),
            )
            row = self._task_row(conn, task["id"])
            repos = self._claim_repos(conn, row)
            again.append(records.claimed_task(row, types[task["runtime_id"]], repos))
        return again

    def extend_lease(self, task_id: str) -> str:
        """Renew a dispatched task's prepare lease (its daemon is still setting it up); the
        task's status, which for any other status is all that happens."""
        now = self._clock()
        with self._tx() as conn:
            conn.execute(
                "UPDATE tasks SET lease_until = ? WHERE id = ? AND status = 'dispatched'",
                (_later(now), task_id),
            )
            return str(self._task_row(conn, task_id)["status"])


def _later(now: str, seconds: float = PREPARE_LEASE) -> str:
    """The clock's time `now` moved by `seconds` (the store's clock gives ISO UTC text)."""
    moment = parse_utc(now)
    if moment is None:  # not the store's clock: nothing is stale, every lease holds
        return now
    return utc_iso(moment.timestamp() + seconds, "microseconds")
