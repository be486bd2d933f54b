"""Many runs stopped at once: how long until the last is gone, how long the event loop went
without a turn meanwhile, and the CPU it cost.

Run from the repo root: `python -m tests.benchmarks.bench_teardown [runs]` (default 200). The
runs share one process registry, as a daemon's do, and the registry adopts orphans when it
can (as root); each agent prints a line and sleeps. Once every agent has printed, all runs
are stopped together — the daemon's shutdown, or 200 tasks ending on one beat — while a
ticker sleeping 5 ms at a time records the longest gap between its turns.
"""

from __future__ import annotations

import logging
import secrets
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from backends.command.lineproto import LineProtocolParser
from backends.process import ProcessRegistry, ProcessSpec, run_process

AGENT = "import time; print('up', flush=True); time.sleep(600)"
TICK = 0.005


async def stop_together(runs: int) -> tuple[float, float, float]:
    """(seconds to the last run ended, the loop's longest gap, CPU seconds) for `runs`."""
    registry = ProcessRegistry()
    registry.adopt_orphans()
    gaps: list[float] = []
    up, stop = anyio.Event(), anyio.Event()
    printed = 0

    async def ticker() -> None:
        while True:
            began = time.perf_counter()
            await anyio.sleep(TICK)
            gaps.append(time.perf_counter() - began - TICK)

    async def one(work_dir: Path) -> None:
        nonlocal printed
        spec = ProcessSpec(
            argv=[sys.executable, "-c", AGENT],
            cwd=work_dir,
            env={"PATH": "/usr/bin:/bin"},
            kill_grace=1.0,
            processes=registry,
            task_id=f"bench-{secrets.token_hex(6)}",
        )
        async with run_process(spec, LineProtocolParser()) as run:
            await anext(aiter(run.messages()))
            printed += 1
            if printed == runs:
                up.set()
            await stop.wait()

    with tempfile.TemporaryDirectory() as tmp:
        async with anyio.create_task_group() as outer:
            outer.start_soon(ticker)
            async with anyio.create_task_group() as tg:
                for _ in range(runs):
                    tg.start_soon(one, Path(tmp))
                await up.wait()
                gaps.clear()
                cpu, began = time.process_time(), time.perf_counter()
                stop.set()
            took, cpu = time.perf_counter() - began, time.process_time() - cpu
            outer.cancel_scope.cancel()
    return took, max(gaps, default=0.0), cpu


def main() -> None:
    logging.basicConfig(level=logging.ERROR)
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    took, gap, cpu = anyio.run(stop_together, runs)
    print(
        f"{runs} runs stopped at once: the last gone after {took:.2f} s; "
        f"the event loop's longest gap {gap * 1000:.0f} ms; CPU {cpu:.2f} s"
    )


if __name__ == "__main__":
    main()
