"""Daemons under load against the Multica-faithful server, side by side: CPU, memory, transcript
lag, requests, lost and duplicated lines, and how soon a task cancelled on the server is
noticed and its agent gone.

Run from the repo root:

    python -m tests.benchmarks.bench_load [SECONDS] [CASE ...] [--runs N]
        [--daemon NAME=COMMAND ...] [--env NAME:KEY=VALUE ...]
        [--delay RTT] [--tls] [--profile DIR]

SECONDS is the window (default 30); cases `20x10` (20 agents × 10 lines/s) and `200x1` by
default; `200x1c5` also cancels 5 tasks on the server after the window; a case ending in `p`
(`20x10p`) measures with the status page open in headless Chromium (this project's daemon).
`--daemon` names each daemon to measure (default: this project's, `ours={python} -m daemon
run`; load_daemons.py says what each is given); with two or more, the runs alternate between
them (`--runs 5`: five of each per case, ours, go, ours, go, ...) and the end prints a table
of medians. Multica's Go daemon, built by hand from its source, is measured the same way:

    --daemon ours='{python} -m daemon run' \\
    --daemon go='/path/to/multica daemon start --foreground --no-auto-update --no-auto-reload'

Each run starts the Multica-faithful fake in its own process (`multica_process.py`: no
`X-Task-Status`, no dedupe; it counts every request by endpoint) and the daemon, queues one
`claude` chat task per agent, and once every agent runs measures over the window:

- the daemon process's CPU (user + system, and the kernel's part), as a share of one core;
- its RSS, sampled from /proc every half second (median and max);
- the lag of every line printed in the window, from the agent printing it to the server
  storing it (p50, p95, max);
- the requests a second by endpoint, as the server counted them (`/404`: no such route);
- for this project's daemon, the requests it had in flight on average in each half of the
  window, pool waits included (from /metrics: `server_request_duration_seconds`); a queue
  that grows shows as a second half above the first.

The agent (`paced_agent.py`) is the `claude` of every daemon. Then the agents are stopped and
every stored transcript is checked: lost lines (printed, never stored), lines or seqs stored
twice, and seqs not 1..N in order. With `cN` it cancels N running tasks on the server and
times each from the cancel to the daemon's cancel-ack.

`--delay 100ms` puts the server 100 ms of round trip away (`--delay 0,50ms,100ms`: each case
at each, 0 being loopback): the daemons reach it through a proxy process that holds every
chunk back half of it each way, and a new connection's first bytes a round trip more, as its
TCP handshake would (`delay_proxy.py`; `tc netem` would do it in the kernel, where the kernel
has sch_netem). `--tls` serves it over TLS with a certificate of a CA made for the run
(trustme), trusted through SSL_CERT_FILE. The benchmark's own calls to the fake go around the
proxy. Targets at 200 × 1: lag p95 ≤ 0.5 s + one round trip, the requests in flight not
growing.
`--profile DIR` (or BENCH_PROFILE=DIR) records a py-spy profile of a Python daemon over the
window (`DIR/<case>-<daemon>.txt`, collapsed stacks; needs `pip install py-spy`).
BENCH_PYTHONPATH=CHECKOUT measures another checkout's daemon as `ours`.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from pathlib import Path

from tests.benchmarks.load_daemons import parse_daemons
from tests.benchmarks.load_report import Run, line, table
from tests.benchmarks.load_run import Case, Server, run_once
from tests.benchmarks.remote import make_certificate


def _delays(text: str) -> list[float]:
    """The round trips (ms) `--delay` names, comma-separated (none: loopback, 0)."""
    delays = []
    for part in text.split(",") if text else ["0"]:
        found = re.fullmatch(r"([\d.]+)\s*(ms|s)?", part.strip())
        if found is None:
            raise SystemExit(f"--delay is a round trip like 50ms (or 50ms,100ms), not {text!r}")
        delays.append(float(found.group(1)) * (1000.0 if found.group(2) == "s" else 1.0))
    return delays


def _cases(args: list[str]) -> tuple[float, list[Case]]:
    window = 30.0
    if args and re.fullmatch(r"[\d.]+", args[0]):
        window, args = float(args[0]), args[1:]
    cases = []
    for text in args or ["20x10", "200x1"]:
        found = re.fullmatch(r"(\d+)x([\d.]+)(?:c(\d+))?(p?)", text)
        if found is None:
            raise SystemExit(f"a case is AGENTSxRATE[cCANCELS][p], not {text!r}")
        agents, rate, cancels, page = found.groups()
        cases.append(Case(int(agents), float(rate), int(cancels or 0), bool(page)))
    return window, cases


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_load",
        description="Daemons under load against the Multica-faithful server, side by side.",
    )
    parser.add_argument("cases", nargs="*", metavar="[SECONDS] CASE")
    parser.add_argument("--daemon", action="append", default=[], metavar="NAME=COMMAND")
    parser.add_argument("--env", action="append", default=[], metavar="NAME:KEY=VALUE")
    parser.add_argument("--runs", type=int, default=1, help="runs of each daemon per case")
    parser.add_argument("--delay", default="", help="round trip(s) to the server: 50ms,100ms")
    parser.add_argument("--tls", action="store_true", help="serve over TLS")
    parser.add_argument("--profile", default=os.environ.get("BENCH_PROFILE", ""))
    options = parser.parse_args()
    window, cases = _cases(options.cases)
    daemons = parse_daemons(options.daemon, options.env)
    results: dict[tuple[str, str], list[Run]] = {}
    profile = Path(options.profile) if options.profile else None
    with tempfile.TemporaryDirectory() as tmp:
        tls = make_certificate(Path(tmp), ["127.0.0.1"]) if options.tls else None
        where = "over TLS" if tls else "plain HTTP"
        print(f"server {where}; window {window:g} s; {options.runs} run(s) per daemon and case")
        for rtt in _delays(options.delay):
            server = Server(tls, rtt)
            away = f" @{rtt:g}ms" if rtt else ""
            for case in cases:
                for _ in range(options.runs):
                    for daemon in daemons:
                        run = run_once(daemon, case, window, server, profile)
                        results.setdefault((case.name + away, daemon.name), []).append(run)
                        print(line(case.name + away, daemon.name, run), flush=True)
    print()
    print(table(results))


if __name__ == "__main__":
    main()
