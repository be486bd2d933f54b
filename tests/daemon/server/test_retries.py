"""The reference server's retry of a provider network failure and its resume rule, as
Multica's `FailTask`, `retryAttemptCeiling` and `GetLastTaskSession` have them."""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from daemon.server.store import Store
from tests.daemon.server.helpers import register
from tests.helpers import embedded_server, running_daemon

NETWORK = "agent_error.provider_network"


def run_and_fail(store: Store, task_id: str, **report: str) -> dict[str, Any]:
    """Claim the queued task and fail it with `report` (error, failure_reason, session…)."""
    runtime = register(store)["claude"]
    (claimed,) = [t for t in store.claim("d1", [runtime], 32) if t["id"] == task_id]
    assert claimed
    return store.fail(task_id, **report)


def test_a_network_failure_is_retried_resuming_its_session(store: Store) -> None:
    """The retry is a new queued task, attempt 2 of 3, resuming the session and work dir."""
    first = store.create_task("p", backend="claude")["id"]
    failed = run_and_fail(
        store, first, error="stream cut", failure_reason=NETWORK, session_id="s1", work_dir="/w"
    )
    retry = store.task(failed["retry"]["id"])
    assert (retry["status"], retry["attempt"], retry["max_attempts"]) == ("queued", 2, 3)
    assert (retry["parent_task_id"], retry["prompt"]) == (first, "p")
    assert (retry["prior_session_id"], retry["prior_work_dir"]) == ("s1", "/w")
    assert retry["fire_at"] is None
    runtime = register(store)["claude"]
    (claimed,) = store.claim("d1", [runtime], 1)
    # Resumed by the session alone: a daemon reuses a named work dir only for an issue or chat.
    assert claimed["prior_session_id"] == "s1" and "prior_work_dir" not in claimed


def test_the_last_attempt_waits_and_then_no_more_come(store: Store) -> None:
    """Attempt 3 is deferred (not claimable until its time); its failure is final."""
    task_id = store.create_task("p")["id"]
    for _ in range(2):
        failed = run_and_fail(store, task_id, error="cut", failure_reason=NETWORK)
        task_id = failed["retry"]["id"]
    last = store.task(task_id)
    assert last["attempt"] == 3 and last["fire_at"] is not None
    runtime = register(store)["claude"]
    assert store.claim("d1", [runtime], 1) == []
    with closing(sqlite3.connect(store.path)) as conn, conn:
        conn.execute("UPDATE tasks SET fire_at = '2000-01-01T00:00:00Z' WHERE id = ?", (task_id,))
    assert [t["id"] for t in store.claim("d1", [runtime], 1)] == [task_id]
    assert "retry" not in store.fail(task_id, "cut", NETWORK)


@pytest.mark.parametrize(
    "reason", ["agent_error.provider_capacity_or_rate_limit", "agent_error.unknown", "timeout"]
)
def test_other_failures_are_not_retried(store: Store, reason: str) -> None:
    """Only a provider network failure is retried here."""
    task_id = store.create_task("p")["id"]
    assert "retry" not in run_and_fail(store, task_id, error="e", failure_reason=reason)


@pytest.mark.parametrize(
    ("reason", "error", "resumed"),
    [
        ("agent_error.provider_capacity_or_rate_limit", "API Error: Request rejected (429)", True),
        ("agent_error.context_overflow", "Prompt is too long", False),
        ("api_invalid_request", "bad image", False),
        ("agent_error.unknown", 'API Error: 400 {"type":"invalid_request_error"}', False),
        ("agent_error.unknown", "Could not resolve authentication method", False),
        ("agent_error.unknown", "messages.3: all messages must have non-empty content", False),
    ],
)
def test_a_rerun_resumes_only_a_session_its_failure_left_usable(
    store: Store, reason: str, error: str, resumed: bool
) -> None:
    """`rerun_of` takes the source's work dir, and its session unless the failure poisoned it."""
    source = store.create_task("p")["id"]
    run_and_fail(store, source, error=error, failure_reason=reason, session_id="s", work_dir="/w")
    rerun = store.create_task("again", rerun_of=source)
    assert rerun["prior_session_id"] == ("s" if resumed else "")
    assert rerun["prior_work_dir"] == "/w"


def test_a_database_from_before_gets_the_new_columns(tmp_path: Path) -> None:
    """A database made before the retry columns opens with them, its tasks on attempt 1."""
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(
            """CREATE TABLE tasks (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
                   workspace_id TEXT NOT NULL, backend TEXT, prompt TEXT NOT NULL,
                   agent TEXT NOT NULL, prior_session_id TEXT NOT NULL DEFAULT '',
                   status TEXT NOT NULL, output TEXT, error TEXT, failure_reason TEXT,
                   session_id TEXT, work_dir TEXT, runtime_id TEXT, claimed_by TEXT,
                   auth_token TEXT, created_at TEXT NOT NULL, claimed_at TEXT, started_at TEXT,
                   finished_at TEXT, cancel_acked_at TEXT,
                   complete_calls INTEGER NOT NULL DEFAULT 0,
                   fail_calls INTEGER NOT NULL DEFAULT 0)"""
        )
        conn.execute(
            "INSERT INTO tasks (id, workspace_id, prompt, agent, status, created_at)"
            " VALUES ('t1', 'default', 'p', '{}', 'queued', '2030-01-01T00:00:00Z')"
        )
    store = Store(path)
    try:
        task = store.task("t1")
        assert (task["attempt"], task["max_attempts"], task["prior_work_dir"]) == (1, 2, "")
    finally:
        store.close()


FLAKY_AGENT = """
import json, os, sys
first = not os.path.exists(MARKER)
open(MARKER, "w").close()
print(json.dumps({"type": "status", "session_id": "sess-1"}), flush=True)
if first:
    print(json.dumps({"type": "result", "is_error": True,
                      "error": "stream disconnected before completion: connection reset"}))
    sys.exit(1)
print(json.dumps({"type": "result", "output": "done on the retry", "session_id": "sess-1"}))
"""


@pytest.mark.anyio
async def test_a_daemon_gets_the_retry_at_once_and_finishes_it(tmp_path: Path) -> None:
    """Through the app: the daemon names the cut from its text, the server retries it and wakes
    the daemon, and the retry resumes the session and completes."""
    agent = tmp_path / "agent.py"
    agent.write_text(FLAKY_AGENT.replace("MARKER", repr(str(tmp_path / "cut-once"))))
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(
            tmp_path, url, MULTICA_COMMAND_PATH=sys.executable, MULTICA_COMMAND_ARGS=str(agent)
        ) as d,
    ):
        first = await d.wait(await d.submit("Do it.", backend="command"), within=30)
        (retry,) = [t for t in await d.api.list_tasks() if t["parent_task_id"] == first["id"]]
        retry = await d.wait(retry["id"], within=30)
    assert (first["status"], first["failure_reason"]) == ("failed", NETWORK)
    assert (first["session_id"], first["work_dir"]) == ("sess-1", retry["prior_work_dir"])
    assert retry["prior_session_id"] == "sess-1"
    assert (retry["status"], retry["output"], retry["attempt"]) == (
        "completed",
        "done on the retry",
        2,
    )
