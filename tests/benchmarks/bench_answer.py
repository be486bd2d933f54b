"""Issue → result latency with the real Claude Code CLI: what a user waits for on one task.

Run from the repo root (needs `npm install --prefix tests/real_cli`):

    python -m tests.benchmarks.bench_answer [ROUNDS] [CASE ...] [--go MULTICA_BINARY]

One real `python -m daemon run` against the Multica-faithful server (tests/fakes/
multica_server.py, in this process), its `claude` the real CLI answering from the fake
Anthropic API (tests/fakes/anthropic_api.py), at the daemon's default intervals. Each round
queues one issue and times it from queued to `completed` on the server (the result comment),
one task at a time. Cases: `answer` (one text answer) and `tools3` (three Bash tool calls, then
the answer); both by default, ROUNDS each (default 6). Prints every round and each case's
median, min and max. `--go` measures Multica's Go daemon too, built by hand (its `multica`
binary; tests/benchmarks/go_daemon.py), in the same way after this one.
BENCH_PYTHONPATH=CHECKOUT measures another checkout's daemon, BENCH_LOG=FILE keeps its log;
extra daemon variables as `KEY=VALUE` arguments (say `MULTICA_CLAUDE_IDLE_WATCHDOG=4s`).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

from daemon.testing import ROOT_AGENTS_ACCEPTED
from tests.benchmarks.go_daemon import go_daemon
from tests.benchmarks.processes import ROOT, running_async
from tests.fakes.anthropic_api import Text, ToolUse, claude_env, fake_anthropic
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.fakes.real_cli import CLAUDE_PINS
from tests.helpers import daemon_env

CASES: dict[str, list[Any]] = {
    "answer": [Text("The answer is 42.")],
    "tools3": [ToolUse("true"), ToolUse("echo two"), ToolUse("echo three"), Text("Done.")],
}


async def _until(check: Any, within: float) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the daemon")
        await anyio.sleep(0.002)


async def _round(fake: MulticaFake, issue: str) -> float:
    begun = time.monotonic()
    task_id = fake.queue_issue(issue, provider="claude")
    await _until(lambda: fake.tasks[task_id].status not in ("queued", "dispatched", "running"), 60)
    elapsed = time.monotonic() - begun
    task = fake.tasks[task_id]
    if task.status != "completed":
        raise SystemExit(f"task {task_id} {task.status}: {task.error}")
    return elapsed


async def bench(rounds: int, cases: list[str], extra: dict[str, str], go: str) -> None:
    cli = CLAUDE_PINS[0].require().path
    daemons = ["ours", "go"] if go else ["ours"]
    results: dict[tuple[str, str], list[float]] = {}
    for daemon in daemons:
        issues = {c: [str(uuid.uuid4()) for _ in range(rounds)] for c in cases}
        by_marker = {issue: CASES[c] for c in cases for issue in issues[c]}
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            async with fake_anthropic(by_marker=by_marker) as api, multica_server() as fake:
                env = {
                    **claude_env(api.url, home / "home"),
                    **daemon_env(home, fake.url),
                    **ROOT_AGENTS_ACCEPTED,
                    "PATH": f"{Path(cli).parent}:{os.environ.get('PATH', '')}",
                    "PYTHONPATH": os.environ.get("BENCH_PYTHONPATH", str(ROOT)),
                    "MULTICA_SCRIPTED_BACKEND": "0",
                    "MULTICA_CLAUDE_PATH": cli,
                    "LOG_LEVEL": "WARNING",
                    "IS_SANDBOX": "1",
                }
                # The daemon's own intervals, not the tests' short ones.
                for key in ("POLL", "HEARTBEAT", "STATUS_POLL"):
                    env.pop(f"MULTICA_DAEMON_{key}_INTERVAL")
                argv = None
                if daemon == "go":
                    argv, go_env = go_daemon(go, home / "go", fake.url)
                    env.update(go_env)
                env.update(extra)
                log = Path(os.environ.get("BENCH_LOG", home / "daemon.log"))
                async with running_async(env, log, argv=argv):
                    await _until(lambda: bool(fake.live_runtimes()), 30)
                    await _round(fake, str(uuid.uuid4()))  # warm-up: the CLI's first start
                    for case in cases:
                        got = results.setdefault((case, daemon), [])
                        for issue in issues[case]:
                            got.append(await _round(fake, issue))
                            print(f"  {case} {daemon}: {got[-1] * 1000:.0f} ms", flush=True)
    for (case, daemon), got in results.items():
        print(
            f"{case} {daemon}: issue → result median {statistics.median(got) * 1000:.0f} ms "
            f"({min(got) * 1000:.0f}–{max(got) * 1000:.0f}, {len(got)})",
            flush=True,
        )


def main() -> None:
    args = sys.argv[1:]
    go = ""
    if "--go" in args:
        at = args.index("--go")
        go = args[at + 1]
        del args[at : at + 2]
    rounds = int(args.pop(0)) if args and args[0].isdigit() else 6
    extra = dict(a.split("=", 1) for a in args if "=" in a)
    cases = [a for a in args if "=" not in a] or list(CASES)
    anyio.run(bench, rounds, cases, extra, go)


if __name__ == "__main__":
    main()
