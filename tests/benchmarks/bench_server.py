"""Reference-server throughput: task creation, claims under contention, transcript writes.

Run: `python -m tests.benchmarks.bench_server [tasks] [claimers]` from the repo
root. Prints one line per phase; nothing is asserted.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

from tests.helpers import embedded_server, server_client


async def _bench(tasks: int, claimers: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with embedded_server(Path(tmp) / "server.db") as url:
            clients = [server_client(url) for _ in range(claimers)]
            try:
                await _run(clients, tasks)
            finally:
                for client in clients:
                    await client.aclose()


async def _run(clients: list[httpx.AsyncClient], tasks: int) -> None:
    started = time.perf_counter()
    for i in range(tasks):
        await clients[0].post("/api/tasks", json={"prompt": f"task {i}"})
    _report("create (sequential)", tasks, started)

    runtimes = []
    for i, client in enumerate(clients):
        answer = await client.post(
            "/api/daemon/register",
            json={"workspace_id": "default", "daemon_id": f"d{i}", "runtimes": [{"type": "x"}]},
        )
        runtimes.append(answer.json()["runtimes"][0]["id"])

    claimed: list[str] = []

    async def claimer(i: int) -> None:
        body = {"daemon_id": f"d{i}", "runtime_ids": [runtimes[i]], "max_tasks": 4}
        while got := (await clients[i].post("/api/daemon/tasks/claim", json=body)).json()["tasks"]:
            claimed.extend(t["id"] for t in got)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(len(clients)):
            tg.start_soon(claimer, i)
    _report(f"claim ({len(clients)} claimers, 4 per claim)", len(claimed), started)
    print(f"  handed out {len(claimed)} tasks, {len(set(claimed))} distinct")

    started = time.perf_counter()
    task_id = claimed[0]
    for seq in range(tasks):
        batch = {"messages": [{"seq": seq, "type": "text", "content": "x" * 200}]}
        await clients[0].post(f"/api/daemon/tasks/{task_id}/messages", json=batch)
    _report("message batches (1 message each)", tasks, started)


def _report(phase: str, count: int, started: float) -> None:
    elapsed = time.perf_counter() - started
    print(f"{phase}: {count} in {elapsed:.2f}s = {count / elapsed:.0f}/s")


def main() -> None:
    tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    claimers = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    anyio.run(_bench, tasks, claimers)


if __name__ == "__main__":
    main()
