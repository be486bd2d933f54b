"""What a daemon does in the seconds after the server deletes its runtime.

Run: `python -m tests.benchmarks.bench_reregister [seconds]` from the repo root (default 20 s).
An in-process daemon (heartbeat every 1 s) serves the Multica-faithful test server, which then
deletes its runtime. Printed: the registers sent in that time, the heartbeats still sent to the
deleted id and those sent to the runtime that replaced it. Multica's daemon registers once and
heartbeats the new id; a daemon bound to the dead id registers on every heartbeat instead.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

from tests.fakes.multica_server import multica_server
from tests.helpers import running_daemon


async def bench(home: Path, seconds: float) -> None:
    async with multica_server() as fake, running_daemon(home, fake.url):
        (old,) = fake.live_runtimes()
        registers, beats = len(fake.seen("register")), len(fake.seen("heartbeat"))
        fake.delete_runtime(old.id)
        await anyio.sleep(seconds)
        sent = [r.body["runtime_id"] for r in fake.seen("heartbeat")[beats:]]
        live = {r.id for r in fake.live_runtimes()}
        print(
            f"in {seconds:g}s after the delete: {len(fake.seen('register')) - registers} "
            f"registers, {sent.count(old.id)} heartbeats to the deleted id, "
            f"{sum(1 for s in sent if s in live)} to its replacement"
        )


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(bench, Path(tmp), seconds)


if __name__ == "__main__":
    main()
