"""What a run's parts cost in memory: RSS per parked anyio task, event and cancel scope.

Run from the repo root: `python -m tests.benchmarks.bench_task_memory [count]` (default 20000).
Each kind is measured in a fresh interpreter, so no kind reuses memory another freed: it makes
`count` of them, keeps them alive, and divides the growth of its RSS by `count`. A run of the
daemon holds eight parked tasks (the run, its stdout, stderr and stdin pumps, the watchdog, the
status poll, the transcript, the tracker) and about as many events and cancel scopes of its
own: this prints what each costs with the anyio installed here (anyio 4.14 gave every task a
handle with a cancel scope and an event of its own).
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

KINDS = {
    "anyio task parked on an event": "task",
    "anyio event": "event",
    "anyio cancel scope": "scope",
}

_PROBE = """
import sys, anyio

def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096

async def parked(event):
    await event.wait()

async def main(kind, count):
    release = anyio.Event()
    kept = []
    before = rss()
    async with anyio.create_task_group() as tg:
        for _ in range(count):
            if kind == "task":
                tg.start_soon(parked, release)
            elif kind == "event":
                kept.append(anyio.Event())
            else:
                kept.append(anyio.CancelScope())
        await anyio.sleep(0.1)  # every task has started and parked
        print((rss() - before) / count)
        release.set()

anyio.run(main, sys.argv[1], int(sys.argv[2]))
"""


def per_item(kind: str, count: int) -> float:
    """Bytes of RSS each of `count` items of `kind` adds, in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, kind, str(count)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return float(done.stdout)


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    print(f"anyio {version('anyio')}, {count} of each")
    for label, kind in KINDS.items():
        print(f"{label:32s} {per_item(kind, count) / 1024:6.2f} KiB")


if __name__ == "__main__":
    main()
