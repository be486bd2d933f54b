"""A real daemon process hears its agents exit without a thread waiting on each."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import (
    NO_PID_NAMESPACE,
    daemon_env,
    daemon_process,
    embedded_server,
    eventually,
    server_client,
)

AGENTS = 8

AGENT = """
import json, os, sys, time
sys.stdin.read()
flag = sys.argv[1]
open(os.path.join(os.path.dirname(flag), f"running.{os.getpid()}"), "w").close()
while not os.path.exists(flag):
    time.sleep(0.05)
print(json.dumps({"type": "result", "output": "done"}), flush=True)
"""
"""Says it runs (a file named after its pid), waits for the flag, then finishes."""


def _waiting_on_children(pid: int) -> int:
    """How many threads of process `pid` are blocked in the kernel waiting for a child."""
    waiting = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            waiting += Path(f"/proc/{pid}/task/{tid}/wchan").read_text() == "do_wait"
    return waiting


def test_a_thread_blocked_in_waitpid_is_seen() -> None:
    """The instrument the test below relies on: a thread in waitpid() shows in /proc."""
    child = subprocess.Popen(["sleep", "30"])
    waiter = threading.Thread(target=child.wait)
    waiter.start()
    try:
        deadline = time.monotonic() + 10
        while _waiting_on_children(os.getpid()) != 1:
            assert time.monotonic() < deadline, "no thread seen in do_wait"
            time.sleep(0.01)
    finally:
        child.kill()
        waiter.join()


@pytest.mark.anyio
async def test_no_thread_waits_on_an_agent_and_every_exit_is_heard(
    tmp_path: Path,
) -> None:
    """Eight agents at once: no thread of the daemon waits in waitpid() (asyncio before 3.12
    keeps one there per agent), and every agent's exit still ends its task."""
    agent, flag = tmp_path / "agent.py", tmp_path / "flag"
    agent.write_text(AGENT)
    command = {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": f"{agent} {flag}"}
    task = {"prompt": "go", "backend": "command"}
    async with (
        embedded_server(tmp_path / "server.db") as url,
        server_client(url) as http,
        daemon_process(daemon_env(tmp_path, url, **command, **NO_PID_NAMESPACE)) as daemon,
    ):
        ids = [(await http.post("/api/tasks", json=task)).json()["id"] for _ in range(AGENTS)]
        running = lambda: len(list(tmp_path.glob("running.*"))) == AGENTS  # noqa: E731
        await eventually(running, within=60)
        waiting = _waiting_on_children(daemon.pid)
        flag.touch()

        async def all_completed() -> bool:
            tasks = [(await http.get(f"/api/tasks/{i}")).json() for i in ids]
            return all(t["status"] == "completed" for t in tasks)

        await eventually(all_completed, within=60)
    assert waiting == 0
