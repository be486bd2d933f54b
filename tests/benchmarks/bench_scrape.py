"""Health port latency and cost while 20 scripted agents stream messages steadily.

Run: `python -m tests.benchmarks.bench_scrape [seconds]` from the repo root (default 10 s per
CPU window). A real `agent-daemon run` child works against a real `agent-daemon server` child;
each of its 20 tasks emits a message every 100 ms, with a tool call every tenth step, so the
daemon drains ~200 messages/s throughout. This process only measures (the client must not
share an interpreter, and so a GIL, with a busy server). Measured, while the agents run:

* the daemon's CPU (its own process, not the agents) with no scraping, then while `/metrics`
  and `/health` are scraped once a second;
* latency of `/metrics` and `/health` over a kept-alive connection (as Prometheus scrapes),
  300 requests each: median, p99 and max. Target: p99 < 50 ms.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
from anyio.streams.text import TextReceiveStream

from daemon.cli.tasks_api import TasksApi
from tests.daemon_child import ROOT, daemon_child
from tests.helpers import TOKEN, daemon_env, eventually, server_client

TASKS = 20
STEP_GAP = 0.1
LATENCY_SAMPLES = 300


def streaming_script(seconds: float) -> dict[str, Any]:
    """A message every STEP_GAP seconds for `seconds`, every tenth step a short tool call."""
    steps: list[dict[str, Any]] = []
    for i in range(int(seconds / STEP_GAP)):
        if i % 10 == 9:
            tool = {"name": "Bash", "call_id": f"c{i}", "input": {"command": "make"}}
            steps.append({"tool": {**tool, "seconds": STEP_GAP, "output": "ok"}})
        else:
            steps.append({"text": f"step {i}: looking at the failing test"})
            steps.append({"sleep": STEP_GAP})
    steps.append({"result": {"output": "done"}})
    return {"steps": steps}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (not its children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def cpu_share(pid: int, seconds: float, health_url: str | None) -> float:
    """The daemon's CPU use in percent of one core over `seconds`, scraping once a second."""
    before, started = cpu_seconds(pid), time.monotonic()
    async with httpx.AsyncClient(timeout=5) as http:
        while time.monotonic() - started < seconds:
            if health_url:
                (await http.get(f"{health_url}/metrics")).raise_for_status()
                (await http.get(f"{health_url}/health")).raise_for_status()
            await anyio.sleep(1.0)
    return 100 * (cpu_seconds(pid) - before) / (time.monotonic() - started)


def latencies(health_url: str) -> dict[str, list[float]]:
    """Milliseconds per request, alternating /metrics and /health, 25 ms apart (a thread)."""
    found: dict[str, list[float]] = {"/metrics": [], "/health": []}
    with httpx.Client(base_url=health_url, timeout=5) as http:
        for _ in range(LATENCY_SAMPLES):
            for path, samples in found.items():
                started = time.perf_counter()
                http.get(path).raise_for_status()
                samples.append(1000 * (time.perf_counter() - started))
                time.sleep(0.025)
    return found


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


@asynccontextmanager
async def server_child(home: Path) -> AsyncIterator[str]:
    """`agent-daemon server` on a free loopback port, as a child process; yields its URL."""
    argv = [sys.executable, "-m", "daemon", "server", "--listen", "127.0.0.1:0"]
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "LOG_LEVEL": "ERROR",
        "MULTICA_DAEMON_TOKEN": TOKEN,
    }
    async with await anyio.open_process(
        argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as process:
        assert process.stdout is not None
        with anyio.fail_after(30):
            async for chunk in TextReceiveStream(process.stdout):
                found = re.search(r"listening on (http://\S+)", chunk)
                if found:
                    break
        assert found, "the server did not start"
        try:
            yield found.group(1)
        finally:
            process.terminate()


async def bench(home: Path, seconds: float) -> None:
    async with server_child(home) as url:
        env = daemon_env(
            home,
            url,
            MULTICA_DAEMON_MAX_CONCURRENT_TASKS=str(TASKS),
            MULTICA_DAEMON_SHUTDOWN_GRACE="1s",
        )
        async with daemon_child(env) as child, server_client(url) as user:
            health_url = child.health_url
            api = TasksApi(user)
            script = streaming_script(3 * seconds + 60)
            for _ in range(TASKS):
                await api.create_task(json.dumps(script), backend="scripted")

            async def all_running() -> bool:
                async with httpx.AsyncClient(timeout=5) as http:
                    doc = (await http.get(f"{health_url}/health")).json()
                return bool(doc["running_task_count"] == TASKS)

            await eventually(all_running, within=60)
            pid = child.process.pid
            quiet = await cpu_share(pid, seconds, None)
            scraped = await cpu_share(pid, seconds, health_url)
            found = await anyio.to_thread.run_sync(latencies, health_url)
            async with httpx.AsyncClient(timeout=5) as http:
                metrics_size = len((await http.get(f"{health_url}/metrics")).content)
                health_size = len((await http.get(f"{health_url}/health")).content)
                doc = (await http.get(f"{health_url}/health")).json()
            messages = sum(t["messages"] for t in doc["tasks"])
            code = await child.stop()
    print(
        f"tasks running:            {doc['running_task_count']} (agent messages so far: {messages})"
    )
    print(f"daemon CPU, not scraped:  {quiet:.1f}% of one core over {seconds:g}s")
    print(f"daemon CPU, scraped 1/s:  {scraped:.1f}% of one core over {seconds:g}s")
    for path, samples in found.items():
        size = metrics_size if path == "/metrics" else health_size
        print(
            f"{path:<9} latency:        median {statistics.median(samples):.2f} ms, "
            f"p99 {p99(samples):.2f} ms, max {max(samples):.2f} ms "
            f"({len(samples)} requests, {size:,} bytes)"
        )
    print(f"daemon exit code:         {code}")


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(bench, Path(tmp), seconds)


if __name__ == "__main__":
    main()
