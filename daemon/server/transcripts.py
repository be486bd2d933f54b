"""The transcripts and token usage half of the reference server's storage."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from daemon.server import records
from daemon.server.bodies import MessageIn, UsageEntryIn
from daemon.server.database import Database


class Transcripts(Database):
    """Each task's messages (once per seq) and its usage per model."""

    def add_messages(self, task_id: str, messages: Sequence[MessageIn]) -> tuple[int, str]:
        """Store the messages once per (task, seq); how many were new, and the task's status."""
        now = self._clock()
        with self._tx() as conn:
            status = str(self._task_row(conn, task_id)["status"])
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
            return conn.total_changes - before, status

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
