"""Idle requests: the HTTP requests a minute an idle daemon with 7 runtimes sends its server
while the control WebSocket is up (heartbeats and claims go on the socket).

Run from the repo root:

    python -m tests.benchmarks.bench_idle_requests [SECONDS] [--daemon NAME=COMMAND ...]

The Multica-faithful fake serves in this process with seven workspaces, so a daemon with one
agent CLI (the load benchmark's `claude`, load_daemons.py) registers seven runtimes. Once the
control connection watches all seven (the socket is up), the requests are counted over SECONDS
(default 60): every HTTP request by endpoint, and every frame the daemon sent on the
socket by type. Prints the HTTP requests a minute per daemon (target: at most 1). `--daemon`
as in bench_load.py (default: this project's daemon); Multica's Go daemon is measured the same
way; BENCH_PYTHONPATH=CHECKOUT measures another checkout's daemon as `ours`.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import anyio

from daemon.testing.waits import wait_for
from tests.benchmarks.load_daemons import Daemon, parse_daemons
from tests.benchmarks.processes import TOKEN
from tests.fakes.loopback import serve_app
from tests.fakes.multica_server import MulticaFake

RUNTIMES = 7
STARTUP_WITHIN = 60.0


async def measure(daemon: Daemon, seconds: float) -> tuple[Counter[str], Counter[str]]:
    """The HTTP requests by endpoint and the socket frames by type over `seconds` of idling."""
    fake = MulticaFake(token=TOKEN)
    for n in range(RUNTIMES - 1):
        fake.add_workspace(f"Workspace {n + 2}")
    async with serve_app(fake.app) as url:
        with tempfile.TemporaryDirectory() as tmp:
            env, _ = daemon.prepare(Path(tmp), url, 1, None)
            log = (Path(tmp) / "daemon.log").open("wb")
            # Started outside the checkout: `-m` puts the working directory first on the path.
            process = await anyio.open_process(
                daemon.argv, env=env, stdout=log, stderr=log, cwd=tmp
            )
            try:
                what = f"{RUNTIMES} runtimes watched on the socket"
                await wait_for(lambda: socket_up(fake), what=what, within=STARTUP_WITHIN)
                requests, frames = len(fake.requests), len(fake.frames)
                await anyio.sleep(seconds)
                http = Counter(r.route for r in fake.requests[requests:] if r.route != "ws")
                sent = Counter(f.route for f in fake.frames[frames:])
            finally:
                process.terminate()
                with anyio.move_on_after(30):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                await process.aclose()
                log.close()
    return http, sent


def socket_up(fake: MulticaFake) -> bool:
    """The seven runtimes are registered and a control connection watches them all."""
    live = {r.id for r in fake.live_runtimes()}
    return len(live) == RUNTIMES and any(live <= ids for ids, _ in fake.watchers)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seconds", nargs="?", type=float, default=60.0)
    parser.add_argument("--daemon", action="append", default=[], metavar="NAME=COMMAND")
    args = parser.parse_args()
    for daemon in parse_daemons(args.daemon, []):
        http, sent = await measure(daemon, args.seconds)
        per_minute = sum(http.values()) * 60.0 / args.seconds
        print(f"{daemon.name}: {per_minute:.1f} HTTP requests a minute idle, {RUNTIMES} runtimes")
        print(f"  HTTP by endpoint over {args.seconds:g}s: {dict(sorted(http.items())) or '-'}")
        print(f"  socket frames sent: {dict(sorted(sent.items())) or '-'}")


if __name__ == "__main__":
    try:
        anyio.run(main)
    except subprocess.SubprocessError as exc:
        raise SystemExit(str(exc)) from None
