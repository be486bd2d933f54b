"""The daemon's own CPU while many agents talk: 20 agents × 10 msg/s and 200 agents × 1 msg/s.

Run: `python -m tests.benchmarks.bench_load [seconds] [case ...]` from the repo root (default a
30 s window; cases `20x10` and `200x1`). Each case starts a separate `agent-daemon server` and
an `agent-daemon run` with default intervals, queues one scripted task per agent (each emits
one text message every 1/rate seconds), and measures the daemon process's CPU time over the
window once every agent runs. Then it checks each stored transcript is seq 1..N with every
message the agent sent. Prints the CPU share of one core per case. Targets: 20×10 ≤ 7 %,
200×1 ≤ 30 %. Set BENCH_PYTHONPATH to another checkout to measure it instead, and
BENCH_PROFILE=DIR to record a py-spy profile of the daemon over the window
(`DIR/<case>.txt`, collapsed stacks; needs `pip install py-spy`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from daemon.server.store import MAX_PAGE
from tests.benchmarks.processes import (
    base_env,
    cpu_seconds,
    free_port,
    running,
    server_client,
    wait_for_runtime,
    wait_until_up,
)

RAMP = 60.0
"""The most starting every agent may take (200 Python children on a small machine)."""
SETTLE = 3.0


def script(rate: float, seconds: float) -> tuple[str, int]:
    """A scripted-backend prompt sending `rate` messages a second for `seconds`; and its count."""
    count = int(rate * seconds)
    steps: list[dict[str, object]] = []
    for i in range(count):
        steps += [{"text": f"message {i + 1}"}, {"sleep": 1 / rate}]
    steps.append({"result": {"output": "done"}})
    return json.dumps({"steps": steps}), count


def run_case(agents: int, rate: float, window: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "server").mkdir()
        (home / "daemon").mkdir()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        prompt, count = script(rate, RAMP + SETTLE + window + 5)
        with running(base_env(home / "server"), "server", "--listen", f"127.0.0.1:{port}"):
            wait_until_up(url, "/api/runtimes")
            env = base_env(
                home / "daemon",
                MULTICA_SERVER_URL=url,
                MULTICA_DAEMON_MAX_CONCURRENT_TASKS=str(agents),
            )
            with running(env, "run") as daemon, server_client(url) as http:
                wait_for_runtime(url)
                ids = [
                    http.post("/api/tasks", json={"prompt": prompt}).raise_for_status().json()["id"]
                    for _ in range(agents)
                ]
                started = time.monotonic()
                while _running(http) < agents:
                    if time.monotonic() - started > RAMP:
                        raise SystemExit(f"only {_running(http)} of {agents} agents started")
                    time.sleep(0.5)
                time.sleep(SETTLE)
                with _profiling(daemon.pid, window, f"{agents}x{rate:g}"):
                    cpu0, t0 = cpu_seconds(daemon.pid), time.monotonic()
                    time.sleep(window)
                    cpu1, t1 = cpu_seconds(daemon.pid), time.monotonic()
                share = (cpu1 - cpu0) / (t1 - t0) * 100
                print(f"{agents}x{rate:g}: daemon CPU {share:.1f}% of a core over {t1 - t0:.0f}s")
                bad, lost = _check(http, ids, count)
                print(
                    f"{agents}x{rate:g}: {agents - bad} of {agents} transcripts complete, "
                    f"{lost} messages lost"
                )


@contextmanager
def _profiling(pid: int, seconds: float, case: str) -> Iterator[None]:
    """py-spy recording `pid` for `seconds` when BENCH_PROFILE names a directory."""
    where = os.environ.get("BENCH_PROFILE")
    if not where:
        yield
        return
    out = Path(where) / f"{case}.txt"
    argv = ["py-spy", "record", "--nonblocking", "--format", "raw", "-r", "50"]
    spy = subprocess.Popen(
        [*argv, "-d", str(int(seconds)), "-o", str(out), "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.wait()
        print(f"{case}: profile in {out}")


def _running(http: httpx.Client) -> int:
    """Tasks claimed and not yet over (a `start` lost to a busy server leaves one dispatched)."""
    return sum(
        len(http.get("/api/tasks", params={"status": status, "limit": MAX_PAGE}).json())
        for status in ("dispatched", "running")
    )


def _check(http: httpx.Client, ids: list[str], count: int) -> tuple[int, int]:
    """Wait for every task to end; how many transcripts are not seq 1..N with all sent, and
    how many messages are missing from them."""
    bad = lost = 0
    for task_id in ids:
        while http.get(f"/api/tasks/{task_id}").json()["status"] not in (
            "completed",
            "failed",
            "cancelled",
        ):
            time.sleep(0.5)
        messages = http.get(f"/api/tasks/{task_id}/messages").json()
        seqs = [m["seq"] for m in messages]
        texts = [m for m in messages if m["type"] == "text"]
        if seqs != list(range(1, len(seqs) + 1)) or len(texts) != count:
            print(f"  task {task_id[:8]}: {len(texts)} of {count} texts, seqs {seqs[:3]}…")
            bad += 1
            lost += max(0, count - len(texts))
    return bad, lost


def main() -> None:
    window = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    cases = sys.argv[2:] or ["20x10", "200x1"]
    for case in cases:
        agents, rate = case.split("x")
        run_case(int(agents), float(rate), window)


if __name__ == "__main__":
    main()
