"""The daemon under load against the Multica-faithful server: transcript lag, CPU, lost and
duplicated messages, and how soon a task cancelled on the server is noticed and its agent gone.

Run: `python -m tests.benchmarks.bench_load [seconds] [case ...]` from the repo root (default a
30 s window; cases `20x10` and `200x1`; a case `200x1c5` also cancels 5 tasks on the server
after the window). Each case starts the Multica-faithful fake in its own process
(`tests/benchmarks/multica_process.py`: no `X-Task-Status`, no dedupe) and an `agent-daemon
run` with default intervals, queues one `command` task per agent (`paced_agent.py`: one text
message every 1/rate seconds, each naming when it was printed), and once every agent runs
measures over the window:

- the daemon process's CPU, as a share of one core;
- the lag of every message printed in the window, from the agent printing it to the server
  storing it (p50, p95, max);
- the daemon's requests a second by endpoint (from its own /metrics).

Then it stops the agents and checks every stored transcript: lost messages (printed, never
stored), duplicated seqs (stored twice) and seqs not 1..N in order. With `cN` it cancels N
running tasks on the server and times each from the cancel to the daemon's cancel-ack, which
it sends after the agent's process tree is gone. Targets: 20×10 lag p95 ≤ 1 s and CPU ≤ 7 %,
200×1 lag p95 ≤ 1 s and CPU ≤ 30 %, cancel p95 ≤ 6 s, 0 lost, 0 duplicated.
A case ending in `p` (`20x10p`) measures with the status page open in headless Chromium
(polling `page.json` through the window) and prints the bytes the page loaded.
Set BENCH_PYTHONPATH to another checkout to measure its daemon instead, and
BENCH_PROFILE=DIR to record a py-spy profile of the daemon over the window
(`DIR/<case>.txt`, collapsed stacks; needs `pip install py-spy`).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import httpx

from tests.benchmarks.processes import (
    base_env,
    cpu_seconds,
    cpu_split,
    free_port,
    wait_until_up,
)

RAMP = 90.0
"""The most starting every agent may take (200 Python children on a small machine)."""
SETTLE = 3.0
AGENT = Path(__file__).with_name("paced_agent.py")
_REQUESTS = re.compile(
    r'^agent_daemon_server_requests_total\{endpoint="(\w+)",outcome="(\w+)"\} (\S+)$'
)
QUEUE_AT_ONCE = 50
"""Tasks queued per call: the fake's wake-up buffer per control connection holds 100."""


def run_case(agents: int, rate: float, window: float, cancels: int, page: bool = False) -> None:
    case = f"{agents}x{rate:g}" + (f"c{cancels}" if cancels else "") + ("p" if page else "")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "daemon").mkdir()
        stop = home / "stop"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = base_env(
            home / "daemon",
            MULTICA_SERVER_URL=url,
            MULTICA_DAEMON_MAX_CONCURRENT_TASKS=str(agents),
            MULTICA_COMMAND_PATH=sys.executable,
            MULTICA_COMMAND_ARGS=str(AGENT),
        )
        fake = [sys.executable, "-m", "tests.benchmarks.multica_process", str(port)]
        with (
            _process(fake, {**os.environ, "PYTHONPATH": str(AGENT.parents[2])}) as server,
            httpx.Client(base_url=url, timeout=60) as http,
        ):
            wait_until_up(url, "/bench/runtimes")
            with _process([sys.executable, "-m", "daemon", "run"], env, cwd=env["HOME"]) as daemon:
                started = time.monotonic()
                while http.get("/bench/runtimes").json() < 2:
                    if time.monotonic() - started > 30:
                        raise SystemExit("the daemon did not register its runtimes")
                    time.sleep(0.1)
                ids: list[str] = []
                while len(ids) < agents:
                    count = min(QUEUE_AT_ONCE, agents - len(ids))
                    body = {"count": count, "message": f"pace {rate:g} {stop}"}
                    ids += http.post("/bench/queue", json=body).raise_for_status().json()
                    time.sleep(0.5)
                started = time.monotonic()
                while (up := _count(http, "running")) < agents:
                    if time.monotonic() - started > RAMP:
                        raise SystemExit(f"only {up} of {agents} agents started")
                    time.sleep(0.5)
                time.sleep(SETTLE)
                health = f"http://{env['MULTICA_DAEMON_HEALTH_ADDR']}/metrics"
                opened = _page_open(health.removesuffix("metrics"), home, case) if page else None
                with opened or nullcontext(), _profiling(daemon.pid, window, case):
                    before = _requests(health)
                    (user0, sys0), t0, w0 = cpu_split(daemon.pid), time.monotonic(), time.time()
                    serving0 = cpu_seconds(server.pid)
                    time.sleep(window)
                    (user1, sys1), t1, w1 = cpu_split(daemon.pid), time.monotonic(), time.time()
                    serving = (cpu_seconds(server.pid) - serving0) / (t1 - t0) * 100
                    after = _requests(health)
                share = (user1 + sys1 - user0 - sys0) / (t1 - t0) * 100
                system = (sys1 - sys0) / (t1 - t0) * 100
                rates = {k: (after[k] - before.get(k, 0)) / (t1 - t0) for k in after}
                cancelled = random.sample(ids, cancels)
                waits = _cancel(http, cancelled) if cancels else []
                stop.touch()
                _wait_all_over(http)
                tasks = http.get("/bench/tasks").json()
                rows = http.get("/bench/messages").json()
        lags, lost, dups, disorder = _check(ids, tasks, rows, (w0, w1))
        q = _quantiles(lags)
        print(
            f"{case}: daemon CPU {share:.1f}% of a core over {t1 - t0:.0f}s ({system:.1f}% in "
            f"the kernel; the server's {serving:.0f}%; load average {os.getloadavg()[0]:.1f})"
        )
        print(
            f"{case}: lag p50 {q[0]:.3f}s p95 {q[1]:.3f}s max {q[2]:.3f}s "
            f"over {len(lags)} messages printed in the window"
        )
        per = ", ".join(f"{k} {v:.1f}" for k, v in sorted(rates.items()) if v >= 0.05)
        print(f"{case}: requests/s {per}")
        print(f"{case}: {lost} lost, {dups} duplicated, {disorder} transcripts out of order")
        if cancels:
            got = sorted(w for w in waits if w is not None)
            c = _quantiles(got)
            print(
                f"{case}: {len(got)} of {cancels} cancels acknowledged; cancel → agent gone "
                f"p50 {c[0]:.2f}s p95 {c[1]:.2f}s max {c[2]:.2f}s"
            )


@contextmanager
def _process(argv: list[str], env: dict[str, str], cwd: str | None = None) -> Iterator[Any]:
    proc = subprocess.Popen(argv, env=env, cwd=cwd)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _count(http: httpx.Client, status: str) -> int:
    return sum(1 for t in http.get("/bench/tasks").json().values() if t["status"] == status)


def _cancel(http: httpx.Client, ids: list[str]) -> list[float | None]:
    """Cancel `ids` on the server; seconds from each cancel to its cancel-ack (None: none)."""
    http.post("/bench/cancel", json={"ids": ids}).raise_for_status()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tasks = http.get("/bench/tasks").json()
        if all(tasks[i]["acked_at"] for i in ids):
            break
        time.sleep(0.2)
    return [
        tasks[i]["acked_at"] - tasks[i]["cancelled_at"] if tasks[i]["acked_at"] else None
        for i in ids
    ]


def _wait_all_over(http: httpx.Client) -> None:
    deadline = time.monotonic() + 120
    while _count(http, "running") + _count(http, "dispatched") and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2.0)  # a cancelled task's last batch may still be on its way


def _requests(metrics_url: str) -> dict[str, float]:
    """The daemon's server requests so far, by endpoint (those not answered `ok` also under
    `endpoint/outcome`)."""
    counts: Counter[str] = Counter()
    for line in httpx.get(metrics_url, timeout=10).text.splitlines():
        found = _REQUESTS.match(line)
        if found:
            endpoint, outcome, value = found.groups()
            counts[endpoint] += float(value)
            if outcome != "ok":
                counts[f"{endpoint}/{outcome}"] += float(value)
    return dict(counts)


def _check(
    ids: list[str],
    tasks: dict[str, Any],
    rows: dict[str, list[Any]],
    window: tuple[float, float],
) -> tuple[list[float], int, int, int]:
    """Lags of messages printed in the window; messages lost (of tasks that completed),
    seqs stored twice, and transcripts whose distinct seqs are not 1..N in order."""
    lags: list[float] = []
    lost = dups = disorder = 0
    for task_id in ids:
        stored = rows.get(task_id, [])
        seqs = [seq for seq, _, _ in stored]
        dups += len(seqs) - len(set(seqs))
        if sorted(set(seqs)) != list(range(1, len(set(seqs)) + 1)):
            disorder += 1
        printed: set[int] = set()
        for _, content, stored_at in stored:
            index, at = content.split()
            printed.add(int(index))
            if window[0] <= float(at) <= window[1]:
                lags.append(stored_at - float(at))
        if tasks[task_id]["status"] == "completed":
            lost += max(printed, default=0) - len(printed)
    return lags, lost, dups, disorder


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return (float("nan"),) * 3
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return at(0.5), at(0.95), ordered[-1]


@contextmanager
def _profiling(pid: int, seconds: float, case: str) -> Iterator[None]:
    """py-spy recording `pid` for `seconds` when BENCH_PROFILE names a directory."""
    where = os.environ.get("BENCH_PROFILE")
    if not where:
        yield
        return
    out = Path(where) / f"{case}.txt"
    argv = ["py-spy", "record", "--nonblocking", "--format", "raw", "-r", "250"]
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


_WEIGHT = """
const entries = [...performance.getEntriesByType("navigation"),
                 ...performance.getEntriesByType("resource")];
return entries.map((e) => [e.name, e.transferSize, e.encodedBodySize]);
"""


@contextmanager
def _page_open(url: str, home: Path, case: str) -> Iterator[None]:
    """The status page at `url`, live in headless Chromium, until the block ends; then the
    bytes it loaded: the page with its files, and the answers of its polls."""
    from tests.e2e.browser import chromium

    with chromium(home / "chromium", home) as browser:
        driver = browser.driver
        driver.get(url)
        started = time.monotonic()
        while driver.execute_script('return document.getElementById("link").dataset.state;') != (
            "live"
        ):
            if time.monotonic() - started > 30:
                raise SystemExit("the status page did not go live")
            time.sleep(0.1)
        yield
        entries = driver.execute_script(_WEIGHT)
    files = [(n, t, b) for n, t, b in entries if not n.endswith("page.json")]
    polls = [(t, b) for n, t, b in entries if n.endswith("page.json")]
    print(
        f"{case}: the page loads {sum(b for _, _, b in files)} bytes in {len(files)} files "
        f"({sum(t for _, t, _ in files)} with headers); {len(polls)} polls of page.json, "
        f"{sum(b for _, b in polls) / max(1, len(polls)):.0f} bytes each on average "
        f"({sum(t for t, _ in polls) / max(1, len(polls)):.0f} with headers)"
    )


def main() -> None:
    window = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    for case in sys.argv[2:] or ["20x10", "200x1"]:
        found = re.fullmatch(r"(\d+)x([\d.]+)(?:c(\d+))?(p?)", case)
        if found is None:
            raise SystemExit(f"a case is AGENTSxRATE[cCANCELS][p], not {case!r}")
        agents, rate, cancels, page = found.groups()
        run_case(int(agents), float(rate), window, int(cancels or 0), page=bool(page))


if __name__ == "__main__":
    main()
