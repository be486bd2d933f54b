"""Start-up: `exec` of `python -m daemon run` → its first register, and → its claim of a task
already queued, against the Multica-faithful server on loopback.

Run from the repo root: `python -m tests.benchmarks.bench_startup [RUNS] [--vs CHECKOUT] [--go
MULTICA_BINARY] [--crash] [--floor] [KEY=VALUE ...]` (default 7 runs). Each run starts the
Multica-faithful fake (tests/fakes/multica_server.py, in this process), queues one issue for
the `claude` runtime, then starts a fresh daemon (a new state directory and HOME each run)
whose `claude` is the real Claude Code CLI when `npm install --prefix tests/real_cli` installed
it (else a shell script answering `--version`), and notes, from just before the exec, when the
server read the daemon's first `register` and its first `claim` (the one that hands out the
task), with the CPU time the daemon had spent by then (user + system, from /proc: a figure a
busy machine moves less than the wall clock). Prints each run and the medians. `--vs CHECKOUT`
alternates with the daemon of another checkout (this one first), `--go` with Multica's Go
daemon built by hand (tests/benchmarks/go_daemon.py); BENCH_PYTHONPATH=CHECKOUT measures
another checkout in place of this one; a CHECKOUT of `installed:PYTHON` runs `PYTHON -m
daemon` as installed in its environment (`pip install .`, not editable: an editable install's
import hook costs every start some milliseconds); `KEY=VALUE` adds a variable to the daemon's
environment.
`--crash`: the daemon is started after a crash instead — a first one, killed (SIGKILL) while
its agent (the scripted backend's, hanging) ran, left its agent and its record behind — and the
claim timed is the one that hands out the server's retry of the task it was running, once the
start-up has killed the leftover and reported the orphan. The daemon's import alone: `python -X
importtime -m daemon --version`.
`--floor`: no daemon and no server; what the interpreter takes to start with the libraries the
daemon is built on, against the daemon's own import, each command in turn RUNS times from
`exec` to its exit: the interpreter alone; httpx, pydantic, anyio, prometheus-client and
websockets imported; the same as the daemon first uses them (anyio's asyncio backend, a
pydantic model defined and one body validated, the collector paused as the daemon's import
pauses it); `python -m daemon --version`, which imports everything `run` imports before its
first register. Whatever the daemon's own code costs comes on top of the third.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from backends.scripted import Script
from daemon.testing import ROOT_AGENTS_ACCEPTED
from tests.benchmarks.go_daemon import go_daemon
from tests.benchmarks.processes import ROOT, cpu_seconds, running_async
from tests.fakes.multica_routes import SeenRequest
from tests.fakes.multica_server import multica_server
from tests.fakes.real_cli import CLAUDE_PINS
from tests.helpers import daemon_env


class _Stamped(list[SeenRequest]):
    """The fake's request log, noting when each route was first read and the daemon's CPU
    time then."""

    def __init__(self) -> None:
        super().__init__()
        self.first: dict[str, tuple[float, float]] = {}
        self.pid = 0

    def append(self, request: SeenRequest) -> None:
        if request.route not in self.first:
            self.first[request.route] = (time.monotonic(), cpu_seconds(self.pid))
        super().append(request)


def _claude(home: Path) -> str:
    """The real Claude Code CLI if installed, else a stand-in that answers `--version`."""
    installed = CLAUDE_PINS[0]._installed()
    if installed is not None:
        return installed
    stand_in = home / "claude"
    stand_in.write_text("#!/bin/sh\necho '2.1.332 (Claude Code)'\n")
    stand_in.chmod(0o755)
    return str(stand_in)


async def _crash(env: dict[str, Any], home: Path, fake: Any, log: _Stamped) -> str:
    """A daemon killed while its agent runs: the id of the task whose retry the next claims."""
    task_id = str(fake.queue_comment(Script().text("working").hang().dumps()))
    crashed = {**env, "MULTICA_SCRIPTED_BACKEND": "1"}
    async with running_async(crashed, home / "crashed.log") as first:
        log.pid = first.pid
        deadline = time.monotonic() + 30
        while not any(m.get("content") == "working" for m in fake.messages_of(task_id)):
            if time.monotonic() > deadline:
                raise SystemExit((home / "crashed.log").read_text())
            await anyio.sleep(0.01)
        first.kill()
        await first.wait()
    return task_id


async def _once(checkout: str, extra: dict[str, str], crash: bool = False) -> dict[str, float]:
    """One start of this project's daemon from `checkout` (`installed:PYTHON`: as installed
    there), or (`go:BINARY`) of Multica's;
    `crash`: after a crash, timing the claim of the retry."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        async with multica_server() as fake:
            log = _Stamped()
            fake.requests = log
            env: dict[str, Any] = {
                **daemon_env(home, fake.url),
                **ROOT_AGENTS_ACCEPTED,
                "PYTHONPATH": checkout,
                "MULTICA_SCRIPTED_BACKEND": "0",
                "MULTICA_CLAUDE_PATH": _claude(home),
                "LOG_LEVEL": "WARNING",
            }
            # The daemon's own intervals, not the tests' short ones.
            for key in ("POLL", "HEARTBEAT", "STATUS_POLL"):
                env.pop(f"MULTICA_DAEMON_{key}_INTERVAL")
            argv = None
            if checkout.startswith("installed:"):  # `pip install .` into that interpreter's venv
                argv = [checkout.removeprefix("installed:"), "-m", "daemon", "run"]
                del env["PYTHONPATH"]
            elif checkout.startswith("go:"):
                argv, go_env = go_daemon(checkout[3:], home / "go", fake.url)
                claude = Path(env["MULTICA_CLAUDE_PATH"]).parent
                env.update(go_env, PATH=f"{claude}:{os.environ.get('PATH', '')}")
            env.update(extra)
            if crash:
                env["MULTICA_SCRIPTED_BACKEND"] = "1"
                crashed = await _crash(env, home, fake, log)
                log.clear()
                log.first.clear()
            else:
                task_id = fake.queue_issue(provider="claude")
            begun = time.monotonic()
            async with running_async(env, home / "daemon.log", argv=argv) as process:
                log.pid = process.pid
                deadline = begun + 30
                while True:
                    if crash:
                        retry = [t for t in fake.tasks.values() if t.parent_id == crashed]
                        if retry and retry[0].status != "queued":
                            break
                    elif fake.tasks[task_id].status != "queued":
                        break
                    if time.monotonic() > deadline:
                        raise SystemExit((home / "daemon.log").read_text())
                    await anyio.sleep(0.005)
            # The task (or the retry, made by the start-up's report of the orphan) was queued
            # before the first claim: that claim hands it out.
            (registered, register_cpu), (claimed, claim_cpu) = (
                log.first["register"],
                log.first["claim"],
            )
            return {
                "register": registered - begun,
                "claim": claimed - begun,
                "register CPU": register_cpu,
                "claim CPU": claim_cpu,
            }


FLOOR = {
    "interpreter": "pass",
    "libraries imported": "import httpx, pydantic, anyio, prometheus_client, websockets",
    "libraries as first used": (
        "import gc; gc.disable()\n"
        "import httpx, anyio, anyio._backends._asyncio, prometheus_client, websockets\n"
        "from pydantic import BaseModel\n"
        "class Body(BaseModel):\n"
        "    id: str = ''\n"
        "Body.model_validate({'id': 'x'})\n"
    ),
}
"""What `--floor` times besides the daemon's import: `python -c` of each."""


def floor(runs: int, checkout: str) -> None:
    """Each of `FLOOR`'s commands and `python -m daemon --version` in turn, `runs` times after
    a warm-up each; prints the medians from `exec` to exit."""
    commands = {name: [sys.executable, "-c", code] for name, code in FLOOR.items()}
    commands["python -m daemon --version"] = [sys.executable, "-m", "daemon", "--version"]
    env = {**os.environ, "PYTHONPATH": checkout}
    took: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, argv in commands.items():
            begun = time.monotonic()
            subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
            if round_:  # the first round warms the byte-code cache
                took[name].append(time.monotonic() - begun)
    for name, times in took.items():
        print(f"{name}: median {statistics.median(times):.3f} s over {runs}", flush=True)


async def bench(
    runs: int, checkouts: dict[str, str], extra: dict[str, str], crash: bool = False
) -> None:
    got: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for checkout in checkouts.values():  # a warm-up each: byte code compiled, caches
        await _once(checkout, extra, crash)
    for _ in range(runs):
        for name, checkout in checkouts.items():
            run = await _once(checkout, extra, crash)
            got[name].append(run)
            print(f"  {name}: " + ", ".join(f"{k} {v:.3f} s" for k, v in run.items()), flush=True)
    for name, rows in got.items():
        medians = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(
            f"{name}: exec → first register median {medians['register']:.3f} s "
            f"(CPU {medians['register CPU']:.3f} s), → claim {medians['claim']:.3f} s "
            f"(CPU {medians['claim CPU']:.3f} s) over {runs}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.bench_startup")
    parser.add_argument("runs", nargs="?", type=int, default=7)
    parser.add_argument("--vs", default="", metavar="CHECKOUT", help="alternate with this one")
    parser.add_argument("--go", default="", metavar="BINARY", help="and with Multica's daemon")
    parser.add_argument("--crash", action="store_true", help="start after a crash, claim the retry")
    parser.add_argument("--floor", action="store_true", help="the libraries' own start-up")
    parser.add_argument("env", nargs="*", metavar="KEY=VALUE")
    options = parser.parse_intermixed_args()
    checkouts = {"this": os.environ.get("BENCH_PYTHONPATH", str(ROOT))}
    if options.floor:
        floor(options.runs, checkouts["this"])
        return
    if options.vs:
        checkouts["vs"] = options.vs
    if options.go:
        checkouts["go"] = f"go:{options.go}"
    if options.crash and options.go:
        parser.error("--crash stages a crash of this project's daemon: not with --go")
    extra = dict(a.split("=", 1) for a in options.env)
    anyio.run(bench, options.runs, checkouts, extra, options.crash)


if __name__ == "__main__":
    main()
