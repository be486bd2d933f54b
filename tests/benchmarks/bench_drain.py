"""Drain throughput: a `command` agent printing realistic messages as fast as it can.

Run: `python -m tests.benchmarks.bench_drain [messages]` from the repo root (default 200,000).
The agent's lines go through the whole daemon — process helper, parser, drain loop, watchdog
bookkeeping, transcript batching — into the embedded server. The baseline only reads the same
lines from a pipe and parses them with `json.loads`. Prints messages/s for both, their ratio,
and how many messages the server stored (must equal what was sent).
Two runs: with the embedded server in the daemon's process, answering it through the app with
no socket (what `agent-daemon run` does by default), and with the server in its own process
over loopback HTTP (as against a real server), and with the Multica-faithful fake in its own
process (`multica_process.py`: it stores each batch as sent, so a duplicate would show).
Targets: ≥ 20,000
messages/s and ≥ 0.3 of the baseline, zero lost.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx

from daemon.server.in_process import InProcess
from tests.benchmarks.processes import ROOT
from tests.helpers import TOKEN, embedded_server, running_daemon, server_client

AGENT = r"""
import json, sys
n = int(sys.argv[1])
sys.stdin.read()
out = sys.stdout
text = "I'll look at the failing test first, then check the fixture it depends on. " * 2
lines = []
for i in range(n):
    kind = i % 5
    if kind == 0:
        m = {"type": "text", "content": f"{text} (step {i})"}
    elif kind == 1:
        m = {"type": "thinking", "content": "The error says the fixture path is wrong; " * 3}
    elif kind == 2:
        m = {"type": "tool_use", "tool": "Bash", "call_id": f"c{i}",
             "input": {"command": f"pytest tests/test_mod_{i % 50}.py -q", "timeout": 120}}
    elif kind == 3:
        m = {"type": "tool_result", "call_id": f"c{i - 1}",
             "output": "collected 12 items\n............\n12 passed in 0.42s\n" * 4}
    else:
        m = {"type": "text", "content": "Fixed. Running the whole suite again."}
    lines.append(json.dumps(m))
    if len(lines) == 2000:
        out.write("\n".join(lines) + "\n")
        lines.clear()
if lines:
    out.write("\n".join(lines) + "\n")
out.write(json.dumps({"type": "result", "output": "done"}) + "\n")
out.flush()
"""


def baseline(agent: Path, n: int) -> float:
    """Messages/s when only reading the agent's lines from a pipe and json-parsing them."""
    started = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, str(agent), str(n)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        count = sum(1 for line in proc.stdout if json.loads(line)) - 1
    elapsed = time.perf_counter() - started
    assert count == n, count
    return n / elapsed


@asynccontextmanager
async def server_process(home: Path) -> AsyncIterator[str]:
    """`agent-daemon server` in its own process (as a separate server would be); its URL."""
    env = {
        **os.environ,
        "HOME": str(home),
        "MULTICA_DAEMON_STATE_DIR": str(home / "srv"),
        "MULTICA_DAEMON_TOKEN": TOKEN,
    }
    async with _serving(["-m", "daemon", "server", "--listen"], env, "/api/tasks") as url:
        yield url


@asynccontextmanager
async def multica_process() -> AsyncIterator[str]:
    """The Multica-faithful fake in its own process (no dedupe, no `X-Task-Status`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    async with _serving(["-m", "tests.benchmarks.multica_process"], env, "/bench/runtimes") as url:
        yield url


@asynccontextmanager
async def _serving(args: list[str], env: dict[str, str], path: str) -> AsyncIterator[str]:
    """`python ARGS 127.0.0.1:PORT` (or `... PORT`) once `path` answers; its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    where = f"127.0.0.1:{port}" if args[-1] == "--listen" else str(port)
    proc = await anyio.open_process(
        [sys.executable, *args, where], env=env, stdout=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with server_client(url) as http:
            with anyio.fail_after(30):
                while True:
                    try:
                        await http.get(path)
                        break
                    except httpx.TransportError:
                        await anyio.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        await proc.wait()


async def through_multica(agent: Path, n: int, home: Path) -> tuple[float, int]:
    """Messages/s from queueing to the completed report against the Multica-faithful fake,
    and how many distinct seqs it stored (it keeps duplicates: they would show as more)."""
    async with (
        multica_process() as url,
        httpx.AsyncClient(base_url=url, timeout=120) as http,
        running_daemon(
            home,
            url,
            MULTICA_COMMAND_PATH=sys.executable,
            MULTICA_COMMAND_ARGS=f"{agent} {n}",
            MULTICA_AGENT_IDLE_WATCHDOG="30m",
        ),
    ):
        with anyio.fail_after(30):
            while True:  # both runtimes (scripted and command) registered
                if (await http.get("/bench/runtimes")).json() >= 2:
                    break
                await anyio.sleep(0.1)
        started = time.perf_counter()
        body = {"count": 1, "message": "go", "provider": "command"}
        (task_id,) = (await http.post("/bench/queue", json=body)).json()
        with anyio.fail_after(600):
            while True:
                if (await http.get("/bench/tasks")).json()[task_id]["status"] == "completed":
                    break
                await anyio.sleep(0.05)
        elapsed = time.perf_counter() - started
        rows = (await http.get("/bench/messages")).json()[task_id]
        seqs = [seq for seq, _, _ in rows]
        assert sorted(seqs) == list(range(1, len(seqs) + 1)), "seq gaps or duplicates"
        return n / elapsed, len(seqs)


async def through_daemon(
    agent: Path, n: int, home: Path, separate: bool = False
) -> tuple[float, int]:
    """Messages/s from claim to the completed report, and how many the server stored."""
    # In-process as `agent-daemon run` has it: the daemon's requests go through the app.
    embedded = None if separate else InProcess()
    server = (
        server_process(home)
        if separate
        else embedded_server(home / "server.db", in_process=embedded)
    )
    async with (
        server as url,
        running_daemon(
            home,
            url,
            in_process=embedded,
            MULTICA_COMMAND_PATH=sys.executable,
            MULTICA_COMMAND_ARGS=f"{agent} {n}",
            MULTICA_AGENT_IDLE_WATCHDOG="30m",
        ) as d,
    ):
        started = time.perf_counter()
        task_id = await d.submit("go", backend="command")
        task = await d.wait(task_id, within=600)
        elapsed = time.perf_counter() - started
        assert task["status"] == "completed", task
        async with server_client(url, timeout=120) as http:
            stored = (await http.get(f"/api/tasks/{task_id}/messages")).json()
        seqs = {m["seq"] for m in stored}
        assert seqs == set(range(1, len(stored) + 1)), "seq gaps or duplicates"
        return n / elapsed, len(stored)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        agent = home / "agent.py"
        agent.write_text(AGENT)
        base = baseline(agent, n)
        rate, stored = anyio.run(through_daemon, agent, n, home / "in-process")
        rate2, stored2 = anyio.run(through_daemon, agent, n, home / "separate", True)
        rate3, stored3 = anyio.run(through_multica, agent, n, home / "multica")
    print(f"messages:                   {n}")
    print(f"baseline (pipe+json.loads): {base:,.0f} messages/s")
    print(
        f"daemon, embedded server in-process (`agent-daemon run`): {rate:,.0f} messages/s, "
        f"ratio {rate / base:.2f}, stored {stored} (lost {n - stored})"
    )
    print(
        f"daemon, server in its own process:                      {rate2:,.0f} messages/s, "
        f"ratio {rate2 / base:.2f}, stored {stored2} (lost {n - stored2})"
    )
    print(
        f"daemon, Multica-faithful server in its own process:      {rate3:,.0f} messages/s, "
        f"ratio {rate3 / base:.2f}, stored {stored3} (lost {n - stored3})"
    )


if __name__ == "__main__":
    main()
