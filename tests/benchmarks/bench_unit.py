"""What containment costs a run: start to first line, and stop to the last process gone.

Run from the repo root, as root: `python -m tests.benchmarks.bench_unit [runs]` (default 50).
Each run starts an agent that puts a sleeping tool in its own session and prints one line,
then the run is cancelled; once plain (a process group and the /proc walk) and once contained
(its own pid namespace and /proc, its cgroups, as `agent-daemon run` makes them here). Prints
the medians and 95th percentiles of both, and the processes left (must be 0).
"""

from __future__ import annotations

import logging
import os
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
from backends.process import TRACKING_ENV, ProcessSpec, run_process, tagged
from backends.process.cgroups import Limits, prepare
from backends.process.unit import Containment, find_tools, probe_namespace

AGENT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print("ready", flush=True)
time.sleep(600)
"""


async def one(workdir: Path, containment: Containment | None) -> tuple[float, float, int]:
    """(start to first line, cancel to all gone, processes left) for one run."""
    spec = ProcessSpec(
        argv=[sys.executable, "-c", AGENT],
        cwd=workdir,
        env={"PATH": os.environ["PATH"]},
        kill_grace=0.5,
        task_id=f"bench-{secrets.token_hex(6)}",
        containment=containment,
    )
    started = time.perf_counter()
    with anyio.CancelScope() as scope:
        async with run_process(spec, LineProtocolParser()) as run:
            await anext(aiter(run.messages()))
            first = time.perf_counter() - started
            decided = time.perf_counter()
            scope.cancel()
            await anyio.sleep(3600)
    return first, time.perf_counter() - decided, len(tagged(TRACKING_ENV, spec.task_id))


def _line(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]
    return f"{label} median {statistics.median(ordered) * 1000:6.1f} ms  p95 {p95 * 1000:6.1f} ms"


async def main(runs: int) -> None:
    tools = find_tools()
    mode, why = probe_namespace(tools, os.geteuid() == 0)
    home, no_cgroup = prepare(Limits(pids=4096), f"bench-{os.getpid()}")
    contained = Containment(
        namespace=bool(mode), user_namespace=mode == "user", cgroups=home, tools=tools
    )
    print(f"{runs} runs each; contained: {contained.name} {why or ''}{no_cgroup or ''}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, containment in (("plain    ", None), ("contained", contained)):
            results = [await one(Path(tmp), containment) for _ in range(runs)]
            print(
                f"{label}  start {_line('', [r[0] for r in results])}   "
                f"stop {_line('', [r[1] for r in results])}   left {sum(r[2] for r in results)}"
            )
    contained.close()


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 50)
