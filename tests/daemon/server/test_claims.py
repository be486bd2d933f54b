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
