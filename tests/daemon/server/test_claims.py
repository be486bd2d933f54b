"""Claims under contention: every queued task goes to exactly one daemon."""

from __future__ import annotations

import contextlib
import random
import threading
from collections import Counter
from pathlib import Path

import anyio
import pytest

from daemon.server.store import Store
from tests.daemon.server.helpers import claim_http, register, register_http
from tests.helpers import embedded_server, server_client

TASKS = 200
CLAIMERS = 8


def _assert_each_task_once(store: Store, handed: list[tuple[str, str]]) -> None:
    """Every task was handed out once, and the database agrees on who got it."""
    counts = Counter(task_id for task_id, _ in handed)
    assert len(counts) == TASKS
    assert max(counts.values()) == 1
    recorded = {t["id"]: t["claimed_by"] for t in store.tasks(limit=TASKS * 2)}
    assert recorded == dict(handed)
    assert store.tasks(status="queued") == []


def test_threads_with_their_own_connections_never_share_a_task(store: Store, db_path: Path) -> None:
    """Eight threads, each with its own connection to the file, claim 200 tasks exactly once."""
    runtimes = {f"d{i}": register(store, f"d{i}")["claude"] for i in range(CLAIMERS)}
    for i in range(TASKS):
        store.create_task(f"p{i}")
    handed: list[tuple[str, str]] = []
    handed_lock = threading.Lock()
    start = threading.Barrier(CLAIMERS)
    errors: list[BaseException] = []

    def claimer(daemon_id: str, seed: int) -> None:
        rng = random.Random(seed)
        own = Store(db_path)
        try:
            start.wait(timeout=30)
            while tasks := own.claim(daemon_id, [runtimes[daemon_id]], rng.randint(1, 7)):
                with handed_lock:
                    handed.extend((t["id"], daemon_id) for t in tasks)
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)
        finally:
            own.close()

    threads = [
        threading.Thread(target=claimer, args=(daemon_id, seed))
        for seed, daemon_id in enumerate(runtimes)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    _assert_each_task_once(store, handed)


@pytest.mark.anyio
async def test_concurrent_http_claimers_never_share_a_task(store: Store, db_path: Path) -> None:
    """Eight daemons claiming over HTTP from two servers on one file get each task once."""
    for i in range(TASKS):
        store.create_task(f"p{i}")
    handed: list[tuple[str, str]] = []
    async with (
        embedded_server(db_path) as url_a,
        embedded_server(db_path) as url_b,
        contextlib.AsyncExitStack() as stack,
    ):
        clients = [
            await stack.enter_async_context(server_client((url_a, url_b)[i % 2]))
            for i in range(CLAIMERS)
        ]
        runtimes = [await register_http(c, f"d{i}") for i, c in enumerate(clients)]

        async def claimer(i: int) -> None:
            while tasks := await claim_http(clients[i], f"d{i}", [runtimes[i]["claude"]], 3):
                handed.extend((t["id"], f"d{i}") for t in tasks)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i in range(CLAIMERS):
                    tg.start_soon(claimer, i)
    _assert_each_task_once(store, handed)


def test_a_task_nobody_started_is_handed_out_again_after_the_recovery_window(
    db_path: Path,
) -> None:
    """A claim whose answer was lost leaves its task dispatched: the same daemon's claim gets
    it again once `RECLAIM_AFTER` passed and its prepare lease ran out (Multica's
    stale-dispatch reclaim), not before; a lease renewed holds it; a started task, or one
    another daemon was handed, never comes again."""
    now = ["2030-01-01T00:00:00.000000Z"]
    store = Store(db_path, clock=lambda: now[0])
    try:
        mine, theirs = register(store, "d1")["claude"], register(store, "d2")["claude"]
        lost = store.create_task("lost")["id"]
        started = store.create_task("started")["id"]
        leased = store.create_task("leased")["id"]
        assert [t["id"] for t in store.claim("d1", [mine], 3)] == [lost, started, leased]
        store.start(started)
        other = store.create_task("other")["id"]
        assert [t["id"] for t in store.claim("d2", [theirs], 1)] == [other]
        now[0] = "2030-01-01T00:01:00.000000Z"
        assert store.extend_lease(leased) == "dispatched"  # held until 1:45
        now[0] = "2030-01-01T00:01:29.000000Z"  # 89 s: within the window
        assert store.claim("d1", [mine], 5) == []
        now[0] = "2030-01-01T00:01:31.000000Z"  # 91 s
        assert [t["id"] for t in store.claim("d1", [mine], 5)] == [lost]
        assert store.claim("d1", [mine], 5) == []  # handed again: its window starts again
        now[0] = "2030-01-01T00:01:46.000000Z"  # the renewed lease ran out
        assert [t["id"] for t in store.claim("d1", [mine], 5)] == [leased]
        assert store.status(lost) == "dispatched"
    finally:
        store.close()
