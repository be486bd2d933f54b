"""One run of the load benchmark: the fake server and one daemon, the agents queued, one
window measured, the transcripts checked (bench_load.py says what and why)."""

from __future__ import annotations

import random
import re
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from tests.benchmarks.load_daemons import Daemon
from tests.benchmarks.load_page import page_open
from tests.benchmarks.load_report import Run, check, quantiles
from tests.benchmarks.processes import ROOT, RssSampler, cpu_split, free_port

RAMP = 180.0
"""The most starting every agent may take (200 Python children on a small machine)."""
SETTLE = 3.0
"""Seconds between every agent printing and the window opening, and between the window closing
and the agents being told to stop: the lines printed in the window are measured in the
steady state, not behind the burst of 200 final reports that follows the stop."""
QUEUE_AT_ONCE = 50
"""Tasks queued per call: the fake's wake-up buffer per control connection holds 100."""
_DURATION = re.compile(
    r'^agent_daemon_server_request_duration_seconds_sum\{endpoint="(\w+)"\} (\S+)$'
)


@dataclass(frozen=True)
class Case:
    agents: int
    rate: float
    cancels: int = 0
    page: bool = False

    @property
    def name(self) -> str:
        return (
            f"{self.agents}x{self.rate:g}"
            + (f"c{self.cancels}" if self.cancels else "")
            + ("p" if self.page else "")
        )


@dataclass(frozen=True)
class Server:
    """How the fake is served: its TLS files (CA bundle, certificate, key; None: plain HTTP)
    and the round trip the daemons see to it (ms; 0: straight to it, on loopback)."""

    tls: tuple[Path, Path, Path] | None
    rtt: float


def run_once(
    daemon: Daemon, case: Case, window: float, server: Server, profile: Path | None
) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        port, near = free_port(), free_port()
        scheme = "https" if server.tls else "http"
        url = f"{scheme}://127.0.0.1:{port}"
        fake = [sys.executable, "-m", "tests.benchmarks.multica_process", str(port)]
        fake += ["127.0.0.1", *(str(p) for p in server.tls[1:])] if server.tls else []
        proxy = [sys.executable, "-m", "tests.benchmarks.delay_proxy", str(near), str(port)]
        daemon_url = f"{scheme}://127.0.0.1:{near}" if server.rtt else url
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(server.tls[0])) if server.tls else True
        )
        bundle = server.tls[0] if server.tls else None
        env, health = daemon.prepare(home, daemon_url, case.agents, bundle)
        log = (home / "daemon.log").open("wb")
        plain = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
        with (
            _process(fake, plain) as fake_proc,
            _process([*proxy, f"{server.rtt:g}"], plain) if server.rtt else nullcontext() as relay,
            httpx.Client(base_url=url, timeout=60, verify=verify) as http,
        ):
            _wait(lambda: _answers(http, "/bench/runtimes"), 30, "the fake did not come up")
            if server.rtt:
                _wait(lambda: _listening(near), 30, "the delaying proxy did not come up")
            with _process(daemon.argv, env, cwd=env["HOME"], out=log) as proc:
                try:
                    return _measure(
                        http,
                        proc,
                        [fake_proc.pid] + ([relay.pid] if relay else []),
                        case,
                        window,
                        home,
                        health,
                        profile,
                        daemon.name,
                    )
                except SystemExit:
                    log.flush()
                    for kept in (home / "daemon.log", home / "home/.multica/daemon.log"):
                        if kept.exists():  # Multica's daemon logs to a file of its own
                            sys.stderr.write(kept.read_text()[-3000:])
                    raise


def _measure(
    http: httpx.Client,
    proc: subprocess.Popen[bytes],
    server_pids: list[int],
    case: Case,
    window: float,
    home: Path,
    health: str,
    profile: Path | None,
    name: str,
) -> Run:
    stop = home / "stop"
    _wait(lambda: "claude" in http.get("/bench/providers").json(), 60, "no claude runtime")
    ids: list[str] = []
    while len(ids) < case.agents:
        count = min(QUEUE_AT_ONCE, case.agents - len(ids))
        body = {"count": count, "message": f"pace {case.rate:g} {stop}", "provider": "claude"}
        ids += http.post("/bench/queue", json=body).raise_for_status().json()
        time.sleep(0.5)
    _wait(lambda: _started(http) >= case.agents, RAMP, "not every agent started")
    failed = _count(http, "failed")
    # Running is the daemon's word; the agent may still be starting (200 interpreters on a
    # small machine): the window opens once every running task's first line is stored.
    printing = lambda: len(http.get("/bench/messages").json()) >= case.agents - failed  # noqa: E731
    _wait(printing, RAMP, "not every agent printed")
    time.sleep(SETTLE)
    metrics = f"http://{health}/metrics"
    opened = page_open(metrics.removesuffix("metrics"), home, case.name) if case.page else None
    spied = _profiling(proc.pid, window, profile, f"{case.name}-{name}", proc.args)
    with opened or nullcontext(), spied, RssSampler(proc.pid) as rss:
        before = http.get("/bench/requests").json()
        flight = [_in_flight(metrics)]
        (user0, sys0), t0, w0 = cpu_split(proc.pid), time.monotonic(), time.time()
        serving0 = [sum(cpu_split(pid)) for pid in server_pids]
        time.sleep(window / 2)
        flight.append(_in_flight(metrics))
        time.sleep(window / 2)
        (user1, sys1), t1, w1 = cpu_split(proc.pid), time.monotonic(), time.time()
        serving = [
            (sum(cpu_split(pid)) - before) / (t1 - t0) * 100
            for pid, before in zip(server_pids, serving0, strict=True)
        ]
        flight.append(_in_flight(metrics))
        after = http.get("/bench/requests").json()
    span = t1 - t0
    rates = {k: (after[k] - before.get(k, 0)) / span for k in after}
    notes = [f"proxy CPU {serving[1]:.0f}%"] if len(serving) > 1 else []
    if failed:
        notes.append(f"{failed} tasks failed as they started (the rest measured)")
    if None not in flight:
        halves = [_little(flight[i], flight[i + 1], span / 2) for i in (0, 1)]
        notes.append(f"in flight {halves[0]:.1f} then {halves[1]:.1f}")
    if case.cancels:
        notes.append(_cancels(http, random.sample(ids, case.cancels)))
    time.sleep(SETTLE)
    stop.touch()
    _wait(lambda: _count(http, "running") + _count(http, "dispatched") == 0, 120, "tasks hang")
    time.sleep(2.0)  # a cancelled task's last batch may still be on its way
    tasks = http.get("/bench/tasks").json()
    rows = http.get("/bench/messages").json()
    unknown = {k: v for k, v in http.get("/bench/requests").json().items() if k.endswith("/404")}
    if unknown:  # routes the daemon called that the fake does not serve
        notes.append("404: " + ", ".join(f"{k[:-4]} ×{v}" for k, v in sorted(unknown.items())))
    lags, lost, dups, disorder = check(ids, tasks, rows, (w0, w1))
    return Run(
        cpu=(user1 + sys1 - user0 - sys0) / span * 100,
        kernel=(sys1 - sys0) / span * 100,
        lag=quantiles(lags),
        lines=len(lags),
        rss=(statistics.median(rss.samples), max(rss.samples)),
        rates=rates,
        lost=lost,
        dups=dups,
        disorder=disorder,
        server_cpu=serving[0],
        notes=notes,
    )


def _little(before: float, after: float, seconds: float) -> float:
    """Requests in flight on average: the time spent in requests per second of wall clock."""
    return (after - before) / seconds


def _in_flight(metrics_url: str) -> float | None:
    """Seconds spent in server requests so far (this project's /metrics; None: no such)."""
    try:
        text = httpx.get(metrics_url, timeout=10).text
    except httpx.HTTPError:
        return None
    found = [float(m.group(2)) for m in map(_DURATION.match, text.splitlines()) if m]
    return sum(found) if found else None


def _cancels(http: httpx.Client, ids: list[str]) -> str:
    """Cancel `ids` on the server; how soon each cancel was acknowledged."""
    http.post("/bench/cancel", json={"ids": ids}).raise_for_status()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tasks = http.get("/bench/tasks").json()
        if all(tasks[i]["acked_at"] for i in ids):
            break
        time.sleep(0.2)
    got = sorted(t["acked_at"] - t["cancelled_at"] for i in ids if (t := tasks[i])["acked_at"])
    c = quantiles(got)
    return (
        f"{len(got)} of {len(ids)} cancels acknowledged, cancel → agent gone "
        f"p50 {c[0]:.2f} p95 {c[1]:.2f} max {c[2]:.2f} s"
    )


def _started(http: httpx.Client) -> int:
    """Tasks running or already over (a daemon may fail a task as it starts it)."""
    statuses = [t["status"] for t in http.get("/bench/tasks").json().values()]
    return sum(1 for status in statuses if status not in ("queued", "dispatched"))


def _count(http: httpx.Client, status: str) -> int:
    return sum(1 for t in http.get("/bench/tasks").json().values() if t["status"] == status)


def _answers(http: httpx.Client, path: str) -> bool:
    try:
        return http.get(path).status_code == 200
    except httpx.TransportError:
        return False


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _wait(ready: Any, within: float, failure: str) -> None:
    deadline = time.monotonic() + within
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(failure)
        time.sleep(0.2)


@contextmanager
def _process(
    argv: list[str], env: dict[str, str], cwd: str | None = None, out: IO[bytes] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=out)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def _profiling(
    pid: int, seconds: float, where: Path | None, name: str, argv: Any
) -> Iterator[None]:
    """py-spy recording a Python daemon for `seconds` when asked (`where`)."""
    if where is None or "python" not in Path(argv[0]).name:
        yield
        return
    where.mkdir(parents=True, exist_ok=True)
    out = where / f"{name}.txt"
    command = ["py-spy", "record", "--nonblocking", "--format", "raw", "-r", "250"]
    spy = subprocess.Popen(
        [*command, "-d", str(int(seconds)), "-o", str(out), "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        spy.wait()
        print(f"{name}: profile in {out}")
