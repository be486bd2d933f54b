"""The daemon's CPU per HTTP request: `ServerClient` over its transport, against the
Multica-faithful server in a process of its own.

Run: `python -m tests.benchmarks.bench_request [seconds] [loops]` from the repo root (default a
20 s window, 20 loops). Three measures of this process's CPU (`time.process_time`, user and
kernel) per request:

- paced, as the daemon sends: `loops` tasks each sending a 5-message transcript batch every
  500 ms (`ServerClient.send_messages`), over the window;
- tight: one task's batches (then status polls) one after the other, 2,000 of each;
- paced over `httpx.MockTransport`: the same calls with no socket — what httpx's client and
  the daemon's caller cost around the transport.

The machine's load changes every figure by tens of percent: compare checkouts in alternating
runs on a quiet machine (run this file from each checkout with its own environment).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx

from daemon.protocol.client import ServerClient, make_http_client
from tests.benchmarks.processes import ROOT, free_port, wait_until_up

PACE = 0.5
BATCH = 5
TIGHT = 2000


def _batch(seq: int) -> list[dict[str, Any]]:
    return [
        {"seq": seq + i, "type": "text", "tool": "", "content": f"line {seq + i}", "output": ""}
        for i in range(BATCH)
    ]


async def _paced(client: ServerClient, ids: list[str], window: float) -> float:
    """CPU µs per request with every task sending a batch each PACE seconds."""
    sent = 0

    async def task(task_id: str) -> None:
        nonlocal sent
        seq = 1
        while True:
            await client.send_messages(task_id, _batch(seq))
            seq += BATCH
            sent += 1
            await anyio.sleep(PACE)

    async with anyio.create_task_group() as tg:
        for task_id in ids:
            tg.start_soon(task, task_id)
        await anyio.sleep(2 * PACE + 1)  # every task past its first request
        before, cpu = sent, time.process_time()
        await anyio.sleep(window)
        cpu, count = time.process_time() - cpu, sent - before
        tg.cancel_scope.cancel()
    return cpu / count * 1e6


async def _tight(call: Callable[[int], Awaitable[object]]) -> float:
    """CPU µs per request with one request after the other."""
    for i in range(100):
        await call(i)
    cpu = time.process_time()
    for i in range(TIGHT):
        await call(i)
    return (time.process_time() - cpu) / TIGHT * 1e6


def _answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={}, request=request)


async def measure(url: str, window: float, loops: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as bench:
        ids = (await bench.post("/bench/queue", json={"count": loops, "message": "x"})).json()
    async with make_http_client(url, "bench", "0") as http:
        client = ServerClient(http)
        paced = await _paced(client, ids, window)
        messages = await _tight(lambda i: client.send_messages(ids[0], _batch(10**6 + i * 5)))
        status = await _tight(lambda i: client.task_status(ids[0]))
    mock = httpx.MockTransport(_answer)
    async with make_http_client(url, "bench", "0", transport=mock) as http:
        mocked = await _paced(ServerClient(http), ids, window)
    print(f"paced ({loops} tasks, a batch each {PACE}s): {paced:.0f} µs CPU per request")
    print(f"tight: messages {messages:.0f} µs, status {status:.0f} µs CPU per request")
    print(f"paced over httpx.MockTransport (client and caller alone): {mocked:.0f} µs")


def main() -> None:
    window = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    loops = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    fake = [sys.executable, "-m", "tests.benchmarks.multica_process", str(port)]
    server = subprocess.Popen(fake, env={"PYTHONPATH": str(ROOT)})
    try:
        wait_until_up(url, "/bench/runtimes")
        anyio.run(measure, url, window, loops)
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
