"""Kill latency: from the decision (the run's scope cancelled) to the last process gone.

Run from the repo root: `python -m tests.benchmarks.bench_kill [runs] [grace]`
(defaults: 100 runs, 0.5 s grace). Each run starts an agent that puts a grandchild in its own
session — the shape of a real CLI running a Bash tool — then cancels the scope around it and
waits for `run_process` to return. Two cases: every process exits on SIGTERM (target < 0.2 s),
and every process ignores SIGTERM (target < grace + 0.2 s). Survivors must be 0. Exits 1 if a
target is missed.
"""

from __future__ import annotations

import logging
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from backends.command.lineproto import LineProtocolParser
from backends.process import (
    TRACKING_ENV,
    ProcessSpec,
    ProcIdentity,
    identify,
    is_alive,
    run_process,
    tagged,
)

AGENT = """
import os, signal, subprocess, sys, time
if os.environ["BENCH_IGNORE_TERM"] == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the grandchild
tool = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                        start_new_session=True)
print(tool.pid, flush=True)
time.sleep(600)
"""


async def one_kill(workdir: Path, ignore_term: bool, grace: float) -> tuple[float, int]:
    """Start one tree, cancel it; returns (seconds from cancel to all gone, survivors)."""
    spec = ProcessSpec(
        argv=[sys.executable, "-c", AGENT],
        cwd=workdir,
        env={"BENCH_IGNORE_TERM": "1" if ignore_term else "0"},
        kill_grace=grace,
        task_id=f"bench-{secrets.token_hex(6)}",
    )
    tree: list[ProcIdentity] = []
    decided = 0.0
    with anyio.CancelScope() as scope:
        async with run_process(spec, LineProtocolParser()) as run:
            grandchild = int((await anext(aiter(run.messages()))).content)
            tree = [p for p in (identify(run.pid), identify(grandchild)) if p is not None]
            decided = time.perf_counter()
            scope.cancel()
            await anyio.sleep(3600)
    latency = time.perf_counter() - decided
    survivors = sum(is_alive(p) for p in tree) + len(tagged(TRACKING_ENV, spec.task_id))
    return latency, survivors


def _summary(label: str, latencies: list[float], survivors: int, target: float) -> bool:
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]
    ok = ordered[-1] < target and survivors == 0
    print(
        f"{label:<30} median {statistics.median(ordered):.3f} s  p95 {p95:.3f} s  "
        f"max {ordered[-1]:.3f} s  survivors {survivors}  target < {target:.3f} s  "
        f"{'OK' if ok else 'MISSED'}"
    )
    return ok


async def main(runs: int, grace: float) -> bool:
    print(f"kill latency over {runs} runs each (leader + grandchild in its own session)")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for label, ignore_term, target in (
            ("exits on SIGTERM", False, 0.2),
            (f"ignores SIGTERM (grace {grace:g} s)", True, grace + 0.2),
        ):
            results = [await one_kill(Path(tmp), ignore_term, grace) for _ in range(runs)]
            ok &= _summary(label, [r[0] for r in results], sum(r[1] for r in results), target)
    return ok


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)  # the kill logs one warning per SIGKILL
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    grace = float(sys.argv[2]) if len(sys.argv) > 2 else 0.5
    sys.exit(0 if anyio.run(main, runs, grace) else 1)
