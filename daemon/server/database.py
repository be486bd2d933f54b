"""The reference server's SQLite database: its schema, its connection, its transactions.

Concurrency: one connection per database object, guarded by a lock, and every call is short (a
few statements, milliseconds). The HTTP layer runs each call in a worker thread
(`anyio.to_thread.run_sync`) so the event loop never waits on SQLite. Every write runs in a
`BEGIN IMMEDIATE` transaction, which takes SQLite's write lock up front: two connections to the
same file (another process, or the tests' extra stores) can never both see a task as `queued`
and hand it out twice. WAL mode lets readers run alongside that writer.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from daemon.files.private import create_private, ensure_dir
from daemon.times import utc_iso

DEFAULT_WORKSPACE = {"id": "default", "name": "Default"}

IN_FLIGHT = ("dispatched", "running")

# `n` orders tasks by arrival: created_at can tie at clock resolution, an integer key cannot.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS workspaces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runtimes (
    id            TEXT PRIMARY KEY,
    daemon_id     TEXT NOT NULL,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    type          TEXT NOT NULL,
    name          TEXT NOT NULL,
    version       TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL,
    device_name   TEXT NOT NULL DEFAULT '',
    cli_version   TEXT NOT NULL DEFAULT '',
    registered_at TEXT NOT NULL,
    last_seen_at  TEXT NOT NULL,
    UNIQUE (daemon_id, workspace_id, type)
);
CREATE TABLE IF NOT EXISTS tasks (
    n                INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id),
    backend          TEXT,
    prompt           TEXT NOT NULL,
    agent            TEXT NOT NULL,
    prior_session_id TEXT NOT NULL DEFAULT '',
    status           TEXT NOT NULL,
    output           TEXT,
    error            TEXT,
    failure_reason   TEXT,
    session_id       TEXT,
    work_dir         TEXT,
    runtime_id       TEXT,
    claimed_by       TEXT,
    auth_token       TEXT,
    created_at       TEXT NOT NULL,
    claimed_at       TEXT,
    started_at       TEXT,
    finished_at      TEXT,
    cancel_acked_at  TEXT,
    complete_calls   INTEGER NOT NULL DEFAULT 0,
    fail_calls       INTEGER NOT NULL DEFAULT 0,
    prior_work_dir   TEXT NOT NULL DEFAULT '',
    attempt          INTEGER NOT NULL DEFAULT 1,
    max_attempts     INTEGER NOT NULL DEFAULT 2,
    parent_task_id   TEXT,
    fire_at          TEXT,
    lease_until      TEXT
);
CREATE TABLE IF NOT EXISTS workspace_repos (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    position     INTEGER NOT NULL,
    url          TEXT NOT NULL,
    PRIMARY KEY (workspace_id, position)
);
CREATE TABLE IF NOT EXISTS task_repos (
    task_id  TEXT NOT NULL REFERENCES tasks(id),
    position INTEGER NOT NULL,
    url      TEXT NOT NULL,
    ref      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, position)
);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks (status, n);
CREATE INDEX IF NOT EXISTS tasks_by_runtime ON tasks (runtime_id, status);
CREATE TABLE IF NOT EXISTS messages (
    task_id     TEXT NOT NULL REFERENCES tasks(id),
    seq         INTEGER NOT NULL,
    type        TEXT NOT NULL,
    tool        TEXT,
    content     TEXT,
    input       TEXT,
    output      TEXT,
    received_at TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
CREATE TABLE IF NOT EXISTS usage (
    task_id            TEXT NOT NULL REFERENCES tasks(id),
    provider           TEXT NOT NULL,
    model              TEXT NOT NULL,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    reported_at        TEXT NOT NULL,
    PRIMARY KEY (task_id, provider, model)
);
"""


def utc_now() -> str:
    """The current time as ISO-8601 UTC with microseconds and a `Z` suffix."""
    return utc_iso(precision="microseconds")


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the database at `path` with the schema and pragmas in place."""
    # Owner-only before SQLite opens it: its -wal and -shm files copy the database's mode.
    create_private(ensure_dir(path.parent) / path.name)
    # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), never implicit.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL under WAL survives a crash of this process; only a power loss can roll back
    # the last commits, which is an acceptable trade for a single-machine reference server.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.executescript(_SCHEMA)
    _add_columns(conn)
    conn.execute(
        "INSERT OR IGNORE INTO workspaces (id, name, created_at) VALUES (?, ?, ?)",
        (DEFAULT_WORKSPACE["id"], DEFAULT_WORKSPACE["name"], utc_now()),
    )
    return conn


# Columns added to `tasks` since its first release: a database made before gets them on open.
_ADDED = {
    "prior_work_dir": "TEXT NOT NULL DEFAULT ''",
    "attempt": "INTEGER NOT NULL DEFAULT 1",
    "max_attempts": "INTEGER NOT NULL DEFAULT 2",
    "parent_task_id": "TEXT",
    "fire_at": "TEXT",
    "lease_until": "TEXT",
}


def _add_columns(conn: sqlite3.Connection) -> None:
    present = {row["name"] for row in conn.execute("PRAGMA table_info(tasks)")}
    for name, kind in _ADDED.items():
        if name not in present:
            conn.execute(f"ALTER TABLE tasks ADD COLUMN {name} {kind}")


class NotFoundError(LookupError):
    """The named task, runtime or workspace does not exist; the message is the wire error."""


class ConflictError(ValueError):
    """The request does not fit the task's state (for example, starting a task never claimed)."""


class StateError(ValueError):
    """The task's status does not allow this step (starting a task that is not dispatched)."""


class Database:
    """One SQLite file behind a lock; subclasses add the operations, each a short transaction."""

    def __init__(self, path: Path, *, clock: Callable[[], str] = utc_now) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._conn = connect(path)

    def close(self) -> None:
        """Close the connection; the file keeps everything for the next open."""
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute(f"BEGIN {mode}")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _task_row(conn: sqlite3.Connection, task_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError("task not found")
        return row


def marks(values: Sequence[Any]) -> str:
    """SQL placeholders for an IN list; an empty list becomes an empty subquery, so that
    `IN` matches nothing and `NOT IN` matches everything."""
    return ", ".join("?" * len(values)) or "SELECT NULL WHERE 0"
