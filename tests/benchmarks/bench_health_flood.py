"""The health port under a slow-loris flood: what it holds, and how fast /healthz answers.

Run: `python -m tests.benchmarks.bench_health_flood [connections]` from the repo root
(default 1,000). Opens that many connections that each send one byte and then nothing,
holds them, and meanwhile times /healthz probes. Prints how many connections the port still
holds (target: at most its cap, 64), the process's thread count, and the probes' median and
worst latency (target: every probe answered 200).
"""

from __future__ import annotations

import select
import socket
import statistics
import sys
import threading
import time

import anyio
import anyio.to_thread
import httpx

from daemon.ops.health import HealthServer
from daemon.ops.metrics import Metrics


def _flood(port: int, count: int, held: list[socket.socket]) -> None:
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"G")
        held.append(sock)


def _still_open(socks: list[socket.socket]) -> int:
    poller = select.poll()
    for sock in socks:
        poller.register(sock, select.POLLIN)
    closed = {fd for fd, _ in poller.poll(0)}
    return sum(1 for sock in socks if sock.fileno() not in closed)


async def main(count: int) -> None:
    server = HealthServer("127.0.0.1:0", Metrics())
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        held: list[socket.socket] = []
        flood = threading.Thread(target=_flood, args=(port, count, held))
        started = time.perf_counter()
        flood.start()
        latencies, statuses = [], []
        async with httpx.AsyncClient(timeout=10) as http:
            while flood.is_alive() or len(latencies) < 20:
                t = time.perf_counter()
                try:
                    statuses.append(
                        (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code
                    )
                except httpx.TransportError:
                    statuses.append(0)
                latencies.append(time.perf_counter() - t)
                await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(flood.join)
        flood_seconds = time.perf_counter() - started
        await anyio.sleep(0.5)
        still = _still_open(held)
        threads = threading.active_count()
        for sock in held:
            sock.close()
        tg.cancel_scope.cancel()
    ok = statuses.count(200)
    print(f"{count} idle connections opened in {flood_seconds:.2f}s; port still holds {still}")
    print(f"threads in the process: {threads}")
    print(
        f"/healthz: {ok}/{len(statuses)} answered 200, median "
        f"{statistics.median(latencies) * 1000:.1f} ms, worst {max(latencies) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
