"""The reference server's storage, on a real SQLite file."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.server.bodies import AgentIn, MessageIn, RuntimeIn, UsageEntryIn
from daemon.server.store import NotFoundError, StateError, Store
from tests.daemon.server.helpers import register


def test_default_workspace_exists(store: Store) -> None:
    """A fresh database already has the default workspace."""
    assert store.workspaces() == [{"id": "default", "name": "Default"}]


def test_reregister_keeps_runtime_ids(store: Store) -> None:
    """Registering the same daemon again returns the same runtime id per type."""
    first = register(store, "d1", "claude", "codex")
    again = register(store, "d1", "codex", "claude")
    assert first == again
    assert register(store, "d2", "claude")["claude"] != first["claude"]


def test_reregister_without_a_backend_takes_its_runtime_offline(store: Store) -> None:
    """A runtime the daemon no longer offers goes offline; the others stay online."""
    ids = register(store, "d1", "claude", "codex")
    register(store, "d1", "claude")
    status = {r["id"]: r["status"] for r in store.runtimes()}
    assert status == {ids["claude"]: "online", ids["codex"]: "offline"}


def test_register_in_unknown_workspace_is_not_found(store: Store) -> None:
    """Registering in a workspace the server does not have names the workspace."""
    with pytest.raises(NotFoundError, match="workspace not found"):
        store.register(daemon_id="d1", workspace_id="nope", runtimes=[RuntimeIn(type="claude")])


def test_heartbeat_updates_last_seen(db_path: Path) -> None:
    """A heartbeat moves the runtime's last heartbeat to the clock's time."""
    now = ["2030-01-01T00:00:00.000000Z"]
    store = Store(db_path, clock=lambda: now[0])
    try:
        runtime = register(store)["claude"]
        now[0] = "2030-01-01T00:00:15.000000Z"
        store.heartbeat(runtime)
        assert store.runtimes()[0]["last_heartbeat_at"] == "2030-01-01T00:00:15.000000Z"
    finally:
        store.close()


def test_heartbeat_for_unknown_runtime_is_not_found(store: Store) -> None:
    """A heartbeat for a runtime the server does not know says so."""
    with pytest.raises(NotFoundError, match="runtime not found"):
        store.heartbeat("missing")


def test_claim_hands_out_oldest_first_up_to_max(store: Store) -> None:
    """Claim returns queued tasks in creation order and no more than asked for."""
    runtime = register(store)["claude"]
    ids = [store.create_task(f"p{i}")["id"] for i in range(5)]
    first = store.claim("d1", [runtime], 2)
    rest = store.claim("d1", [runtime], 10)
    assert [t["id"] for t in first] == ids[:2]
    assert [t["id"] for t in rest] == ids[2:]
    assert store.claim("d1", [runtime], 10) == []


def test_claim_matches_backend_to_runtime_type(store: Store) -> None:
    """A task naming a backend goes only to a runtime of that type; one naming none, to any."""
    ids = register(store, "d1", "claude", "codex")
    codex_task = store.create_task("c", backend="codex")["id"]
    any_task = store.create_task("a")["id"]
    store.create_task("x", backend="gemini")
    claude_only = store.claim("d1", [ids["claude"]], 10)
    assert [(t["id"], t["runtime_id"], t["backend"]) for t in claude_only] == [
        (any_task, ids["claude"], "claude")
    ]
    codex = store.claim("d1", [ids["claude"], ids["codex"]], 10)
    assert [(t["id"], t["runtime_id"], t["backend"]) for t in codex] == [
        (codex_task, ids["codex"], "codex")
    ]
    assert [t["backend"] for t in store.tasks(status="queued")] == ["gemini"]


def test_claim_stays_within_the_runtime_workspace(store: Store) -> None:
    """A runtime registered in one workspace never receives another workspace's tasks."""
    other = store.add_workspace("Other")["id"]
    default_runtime = register(store)["claude"]
    other_runtime = register(store, workspace=other)["claude"]
    other_task = store.create_task("o", workspace_id=other)["id"]
    assert store.claim("d1", [default_runtime], 10) == []
    assert [t["id"] for t in store.claim("d1", [other_runtime], 10)] == [other_task]


def test_claim_skips_unknown_and_foreign_runtimes(store: Store) -> None:
    """Unknown runtime ids and another daemon's runtimes are skipped, as Multica skips them."""
    theirs = register(store, "d2")["claude"]
    task_id = store.create_task("p")["id"]
    assert store.claim("d1", ["missing", theirs], 10) == []
    assert store.status(task_id) == "queued"


def test_claim_hands_out_at_most_32_tasks(store: Store) -> None:
    """Multica caps one claim at 32 tasks (claimBatchMaxTasksCap), whatever max_tasks asks."""
    runtime = register(store)["claude"]
    for i in range(40):
        store.create_task(f"p{i}")
    assert len(store.claim("d1", [runtime], 1000)) == 32
    assert len(store.claim("d1", [runtime], 1000)) == 8


def test_claimed_task_carries_protocol_fields(store: Store) -> None:
    """A claimed task has the agent, a task-scoped token, the prompt and the claim recorded."""
    runtime = register(store, "d7")["claude"]
    agent = AgentIn(id="a1", name="Coder", custom_env={"K": "v"}, custom_args=["--x"], model="m")
    store.create_task("do it", agent=agent, prior_session_id="s0")
    [task] = store.claim("d7", [runtime], 1)
    assert task["agent"] == agent.model_dump()
    assert task["agent_id"] == "a1"
    assert (task["prompt"], task["prior_session_id"], task["workspace_id"]) == (
        "do it",
        "s0",
        "default",
    )
    assert task["auth_token"].startswith("mat_") and len(task["auth_token"]) == 44
    view = store.task(task["id"])
    assert (view["status"], view["claimed_by"], view["runtime_id"]) == ("dispatched", "d7", runtime)
    assert "auth_token" not in view


def test_each_claimed_task_gets_its_own_token(store: Store) -> None:
    """Task-scoped tokens are fresh per task."""
    runtime = register(store)["claude"]
    for i in range(3):
        store.create_task(f"p{i}")
    tokens = {t["auth_token"] for t in store.claim("d1", [runtime], 3)}
    assert len(tokens) == 3


def test_start_moves_dispatched_to_running_once(store: Store) -> None:
    """Start marks a claimed task running; a repeat is refused and keeps the first start time
    (Multica's StartAgentTask updates only a dispatched row)."""
    runtime = register(store)["claude"]
    task_id = store.create_task("p")["id"]
    store.claim("d1", [runtime], 1)
    assert store.start(task_id) == "running"
    started = store.task(task_id)["started_at"]
    with pytest.raises(StateError, match="running, not dispatched"):
        store.start(task_id)
    assert store.task(task_id)["started_at"] == started


def test_start_of_unclaimed_task_is_refused(store: Store) -> None:
    """A task nobody claimed cannot start."""
    task_id = store.create_task("p")["id"]
    with pytest.raises(StateError, match="queued, not dispatched"):
        store.start(task_id)
    assert store.status(task_id) == "queued"


def test_duplicate_seq_is_stored_once(store: Store) -> None:
    """A re-sent (task, seq) is ignored: the first copy stays and is counted once."""
    task_id = store.create_task("p")["id"]
    assert store.add_messages(task_id, [MessageIn(seq=1, type="text", content="first")])[0] == 1
    again = [MessageIn(seq=1, type="text", content="resent"), MessageIn(seq=2, type="text")]
    assert store.add_messages(task_id, again)[0] == 1
    assert [(m["seq"], m["content"]) for m in store.messages(task_id)] == [
        (1, "first"),
        (2, None),
    ]


def test_messages_come_back_in_seq_order_after_a_given_seq(store: Store) -> None:
    """The transcript is ordered by seq whatever the arrival order, and can start after a seq."""
    task_id = store.create_task("p")["id"]
    store.add_messages(task_id, [MessageIn(seq=s, type="text", content=str(s)) for s in (3, 1, 2)])
    tool = MessageIn(seq=4, type="tool_use", tool="Bash", input={"command": "make"})
    store.add_messages(task_id, [tool])
    assert [m["seq"] for m in store.messages(task_id)] == [1, 2, 3, 4]
    after = store.messages(task_id, after_seq=2)
    assert [m["seq"] for m in after] == [3, 4]
    assert after[1]["input"] == {"command": "make"}


def test_complete_then_fail_changes_nothing_but_counts(store: Store) -> None:
    """A terminal task ignores later reports; each report is still counted."""
    runtime = register(store)["claude"]
    task_id = store.create_task("p")["id"]
    store.claim("d1", [runtime], 1)
    store.start(task_id)
    store.complete(task_id, "done", session_id="s1", work_dir="/w")
    finished = store.task(task_id)["finished_at"]
    store.complete(task_id, "other")
    store.fail(task_id, "boom", "agent_error")
    task = store.task(task_id)
    assert (task["status"], task["output"], task["session_id"], task["work_dir"]) == (
        "completed",
        "done",
        "s1",
        "/w",
    )
    assert (task["error"], task["finished_at"]) == (None, finished)
    assert (task["complete_calls"], task["fail_calls"]) == (2, 1)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("crashed", "agent_error.unknown"),
        ("", "agent_error.unknown"),
        ("claude exited: exit status 1", "agent_error.process_failure"),
        ("API Error: 529 Overloaded", "agent_error.provider_capacity_or_rate_limit"),
        ("dial tcp 10.0.0.1:443: connection refused", "agent_error.provider_network"),
        ("prompt is too long: 210000 tokens", "agent_error.context_overflow"),
        ("Invalid API key · Please run /login", "agent_error.provider_auth_or_access"),
        ("agent timed out after 2h", "agent_error.agent_timeout"),
    ],
)
def test_fail_without_reason_is_classified_from_the_error(
    store: Store, error: str, reason: str
) -> None:
    """A failure without a reason gets one from its error text, as Multica's FailTask does."""
    runtime = register(store)["claude"]
    task_id = store.create_task("p")["id"]
    store.claim("d1", [runtime], 1)
    task = store.fail(task_id, error)
    assert (task["status"], task["error"], task["failure_reason"]) == ("failed", error, reason)


def test_fail_keeps_a_given_reason(store: Store) -> None:
    """A reason the daemon sends is stored as sent, even when the text would classify."""
    runtime = register(store)["claude"]
    task_id = store.create_task("p")["id"]
    store.claim("d1", [runtime], 1)
    assert store.fail(task_id, "exit status 1", "idle_watchdog")["failure_reason"] == (
        "idle_watchdog"
    )


def test_reports_on_a_task_not_in_flight_change_nothing(store: Store) -> None:
    """Complete of a task that is not running, and fail of one not dispatched or running, are
    accepted and ignored (Multica answers them 200 as already final); each is counted."""
    runtime = register(store)["claude"]
    dispatched = store.create_task("d")["id"]
    store.claim("d1", [runtime], 1)
    queued = store.create_task("q")["id"]
    store.cancel(queued)
    assert store.complete(dispatched, "early")["status"] == "dispatched"
    assert store.fail(queued, "late")["status"] == "cancelled"
    assert store.fail(dispatched, "never started")["status"] == "failed"
    task = store.task(dispatched)
    assert (task["output"], task["complete_calls"], task["fail_calls"]) == (None, 1, 1)


def test_recover_orphans_fails_only_that_runtimes_in_flight_tasks(store: Store) -> None:
    """Dispatched and running tasks of the runtime fail with runtime_recovery; others stay."""
    ids = register(store, "d1", "claude", "codex")
    dispatched, running, done = (store.create_task(p, backend="claude")["id"] for p in "abc")
    other = store.create_task("o", backend="codex")["id"]
    queued = store.create_task("q", backend="claude")["id"]
    store.claim("d1", [ids["claude"]], 3)
    store.claim("d1", [ids["codex"]], 1)
    store.start(running)
    store.start(done)
    store.complete(done, "ok")
    assert store.recover_orphans(ids["claude"]) == 2
    for task_id in (dispatched, running):
        task = store.task(task_id)
        assert (task["status"], task["failure_reason"]) == ("failed", "runtime_recovery")
    assert [store.status(t) for t in (done, other, queued)] == ["completed", "dispatched", "queued"]


def test_cancel_only_affects_unfinished_tasks(store: Store) -> None:
    """Cancel ends a queued or running task and leaves a finished one as it was."""
    runtime = register(store)["claude"]
    finished = store.create_task("f")["id"]
    waiting = store.create_task("w")["id"]
    store.claim("d1", [runtime], 1)
    store.start(finished)
    store.complete(finished, "ok")
    assert store.cancel(waiting)["status"] == "cancelled"
    assert store.cancel(finished)["status"] == "completed"
    assert store.claim("d1", [runtime], 10) == []


def test_cancel_ack_is_recorded(store: Store) -> None:
    """The daemon's acknowledgement of a cancel shows on the task."""
    task_id = store.create_task("p")["id"]
    store.cancel(task_id)
    assert store.task(task_id)["cancel_acked"] is False
    store.cancel_ack(task_id)
    assert store.task(task_id)["cancel_acked"] is True


def test_usage_is_kept_per_model_and_replaced_by_later_totals(store: Store) -> None:
    """Usage reports are running totals: a repeat for the same model replaces, not adds."""
    task_id = store.create_task("p")["id"]
    store.record_usage(task_id, [UsageEntryIn(provider="anthropic", model="m", input_tokens=5)])
    store.record_usage(
        task_id,
        [
            UsageEntryIn(provider="anthropic", model="m", input_tokens=7, output_tokens=3),
            UsageEntryIn(provider="anthropic", model="n", cache_read_tokens=2),
        ],
    )
    usage = store.usage(task_id)
    assert [(u["model"], u["input_tokens"], u["output_tokens"]) for u in usage] == [
        ("m", 7, 3),
        ("n", 0, 0),
    ]


def test_deregister_takes_runtimes_offline(store: Store) -> None:
    """Deregistered runtimes show as offline; a heartbeat brings one back."""
    ids = register(store, "d1", "claude", "codex")
    assert store.deregister([*ids.values(), "unknown"]) == 2
    assert {r["status"] for r in store.runtimes()} == {"offline"}
    store.heartbeat(ids["claude"])
    assert {r["id"]: r["status"] for r in store.runtimes()}[ids["claude"]] == "online"


def test_unknown_task_is_not_found_everywhere(store: Store) -> None:
    """Every task operation on an unknown id raises 'task not found'."""
    calls = [
        lambda: store.task("x"),
        lambda: store.status("x"),
        lambda: store.start("x"),
        lambda: store.complete("x", ""),
        lambda: store.fail("x", ""),
        lambda: store.cancel("x"),
        lambda: store.cancel_ack("x"),
        lambda: store.add_messages("x", []),
        lambda: store.messages("x"),
        lambda: store.record_usage("x", []),
        lambda: store.usage("x"),
    ]
    for call in calls:
        with pytest.raises(NotFoundError, match="task not found"):
            call()


def test_timestamps_are_iso8601_utc(store: Store) -> None:
    """Stored times parse as ISO-8601 and are in UTC."""
    created = store.create_task("p")["created_at"]
    assert created.endswith("Z")
    parsed = datetime.fromisoformat(created)
    assert parsed.utcoffset() == UTC.utcoffset(None)
    assert abs((datetime.now(UTC) - parsed).total_seconds()) < 60


def test_data_survives_close_and_reopen(db_path: Path) -> None:
    """Tasks, transcripts and runtimes are still there after the database is reopened."""
    first = Store(db_path)
    runtime = register(first)["claude"]
    task_id = first.create_task("persist me")["id"]
    first.claim("d1", [runtime], 1)
    first.add_messages(task_id, [MessageIn(seq=1, type="text", content="hello")])
    first.close()

    second = Store(db_path)
    try:
        assert second.task(task_id)["status"] == "dispatched"
        assert second.task(task_id)["prompt"] == "persist me"
        assert [m["content"] for m in second.messages(task_id)] == ["hello"]
        assert register(second)["claude"] == runtime
        assert second.workspaces() == [{"id": "default", "name": "Default"}]
    finally:
        second.close()


def test_database_is_in_wal_mode(store: Store, db_path: Path) -> None:
    """The database file uses write-ahead logging, so readers never block the writer."""
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
