"""Submit → claim latency with the default 30 s poll interval, embedded and separate server.

Run: `python -m tests.benchmarks.bench_pickup [count] [mode]` from the repo root (default 20
submissions, both modes; mode `embedded` or `separate`). Each mode starts a real
`agent-daemon run` (with its embedded server, or against a separate `agent-daemon server`),
then submits `count` tasks one after another at random gaps of 0.2–3 s, each once the previous
one was claimed. The latency is the server's own `claimed_at - created_at`. Prints the median
and the max per mode. Targets: embedded median ≤ 0.1 s, max ≤ 0.5 s; separate ≤ 0.25 s / 1 s.
Set BENCH_PYTHONPATH to another checkout to measure it instead.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from tests.benchmarks.processes import (
    base_env,
    free_port,
    running,
    server_client,
    wait_for_runtime,
    wait_until_up,
)

SCRIPT = '{"steps": [{"text": "hi"}, {"result": {"output": "ok"}}]}'


@contextmanager
def embedded(home: Path) -> Iterator[str]:
    """A daemon with its embedded server; yields the server URL."""
    port = free_port()
    env = base_env(home, MULTICA_EMBEDDED_LISTEN=f"127.0.0.1:{port}")
    with running(env, "run"):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def separate(home: Path) -> Iterator[str]:
    """`agent-daemon server` plus a daemon pointed at it; yields the server URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server_env = base_env(home / "server")
    with running(server_env, "server", "--listen", f"127.0.0.1:{port}"):
        wait_until_up(url, "/api/runtimes")
        with running(base_env(home / "daemon", MULTICA_SERVER_URL=url), "run"):
            yield url


def measure(url: str, count: int) -> list[float]:
    """Latencies of `count` sequential submissions, in seconds."""
    wait_for_runtime(url)
    latencies = []
    with server_client(url, timeout=10) as http:
        for _ in range(count):
            time.sleep(random.uniform(0.2, 3.0))
            task = http.post("/api/tasks", json={"prompt": SCRIPT}).raise_for_status().json()
            while not task["claimed_at"]:
                time.sleep(0.01)
                task = http.get(f"/api/tasks/{task['id']}").json()
            latencies.append(_seconds(task["claimed_at"]) - _seconds(task["created_at"]))
            print(f"  {latencies[-1]:.3f}s", flush=True)
    return latencies


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    modes = sys.argv[2:] or ["embedded", "separate"]
    for mode in modes:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "server").mkdir()
            (Path(tmp) / "daemon").mkdir()
            with {"embedded": embedded, "separate": separate}[mode](Path(tmp)) as url:
                print(f"{mode}: {count} submissions", flush=True)
                got = measure(url, count)
        print(
            f"{mode}: submit → claim median {statistics.median(got):.3f}s, "
            f"max {max(got):.3f}s over {len(got)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
