"""Crash recovery of a real daemon process: leftovers killed, tasks settled, strangers spared."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from backends.process import (
    TRACKING_ENV,
    ProcIdentity,
    boot_id,
    identify,
    is_alive,
    signal_group_of,
    tagged,
)
from daemon.logs import short_id
from daemon.state.agent_records import AgentRecord, AgentRecords
from tests.helpers import (
    FINAL,
    NO_PID_NAMESPACE,
    daemon_env,
    daemon_process,
    embedded_server,
    eventually,
    server_client,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="/proc and subreapers are Linux only"),
]

SLEEPER = "import time; time.sleep(120)"

HANGING_TREE = {
    "steps": [
        {"text": "working"},
        {"spawn_tree": {"setsid": True, "depth": 2}},
        {"text": "tree started"},
        {"hang": True},
    ]
}
"""An agent that starts a sleeping chain in its own session (like a Bash tool) and hangs.

Once the daemon is gone the agent dies at its next write to stdout (EPIPE), as a real CLI
would; the test waits for its last line, so the agent itself outlives the daemon too."""


class Leftovers:
    """Everything a test may leave running; killed by group (identity checked) afterwards."""

    def __init__(self) -> None:
        self.task_ids: list[str] = []
        self.identities: list[ProcIdentity] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, code: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
        self.procs.append(proc)
        return proc

    def cleanup(self) -> None:
        tagged_ones = [p for t in self.task_ids for p in tagged(TRACKING_ENV, t)]
        for identity in [*self.identities, *tagged_ones]:
            signal_group_of(identity, signal.SIGKILL)
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)


@contextmanager
def leftovers() -> Iterator[Leftovers]:
    left = Leftovers()
    try:
        yield left
    finally:
        left.cleanup()


@asynccontextmanager
async def server_and_api(tmp_path: Path) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    async with (
        embedded_server(tmp_path / "server.db") as url,
        server_client(url) as http,
    ):
        yield url, http


async def get_task(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    task: dict[str, Any] = (await http.get(f"/api/tasks/{task_id}")).json()
    return task


async def runtime_ids(http: httpx.AsyncClient) -> list[str]:
    return sorted(r["id"] for r in (await http.get("/api/runtimes")).json())


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of `pid`, zombies included; None once it is fully gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[19])


async def test_restart_kills_the_tree_a_killed_daemon_left_and_settles_the_task(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """SIGKILL mid-run leaves the tree alive; the next daemon kills all of it, then settles."""
    records = AgentRecords(tmp_path / "state" / "agents")
    with leftovers() as left:
        async with server_and_api(tmp_path) as (url, http):
            env = daemon_env(tmp_path, url, **NO_PID_NAMESPACE)
            async with daemon_process(env) as first:
                created = await http.post("/api/tasks", json={"prompt": json.dumps(HANGING_TREE)})
                task_id = created.json()["id"]
                left.task_ids.append(task_id)

                async def quiet() -> bool:
                    messages = (await http.get(f"/api/tasks/{task_id}/messages")).json()
                    return "tree started" in json.dumps(messages)

                await eventually(quiet, within=20)
                # The agent, the session leader of its tree, and the process below that.
                await eventually(lambda: len(tagged(TRACKING_ENV, task_id)) == 3, within=20)
                tree = tagged(TRACKING_ENV, task_id)
                left.identities += tree
                await eventually(lambda: [r.pid for r in records.records()] != [0], within=10)
                [record] = records.records()
                assert record.task_id == task_id and record.backend == "scripted"
                assert ProcIdentity(record.pid, record.start_time) in tree
                assert (await get_task(http, task_id))["status"] == "running"
                runtimes_before = await runtime_ids(http)

                first.kill()
                with anyio.fail_after(10):
                    assert await first.wait() == -signal.SIGKILL
            capfd.readouterr()

            assert [p.pid for p in tree if not is_alive(p)] == []
            assert (await get_task(http, task_id))["status"] == "running"

            async with daemon_process(env):

                async def settled() -> bool:
                    return (await get_task(http, task_id))["status"] in FINAL

                await eventually(settled, within=30)
                # Leftovers are killed before recover-orphans: gone by the time it settles.
                assert [p.pid for p in tree if is_alive(p)] == []
                assert tagged(TRACKING_ENV, task_id) == []
                task = await get_task(http, task_id)
                assert await runtime_ids(http) == runtimes_before
                assert records.records() == []
        logs = capfd.readouterr().err
    assert task["status"] == "failed"
    assert task["failure_reason"] == "runtime_recovery"
    assert task["runtime_id"] in runtimes_before
    assert "child subreaper: orphaned agent processes come back to the daemon" in logs
    assert "crash recovery: 1 agent record(s) from a previous run" in logs
    pids = sorted(p.pid for p in tree)
    by_record = (
        f"task {short_id(task_id)}: killed 3 leftover process(es) of backend scripted "
        f"(recorded pid {record.pid}): pids {pids}"
    )
    # Where the run had a cgroup (a writable tree, as root here), the group went first, whole.
    assert by_record in logs or "a previous run's group, killed and removed" in logs, logs
    assert "server failed 1 orphaned tasks" in logs


def record_of(task_id: str, pid: int, start_time: int) -> AgentRecord:
    """A record as a daemon of this boot writes it for a started agent."""
    return AgentRecord(task_id, "scripted", pid, pid, start_time, boot_id())


async def test_a_recorded_pid_now_used_by_a_stranger_is_left_alone(tmp_path: Path) -> None:
    """At start, a record whose pid was reused spares that process; a real leftover dies."""
    records = AgentRecords(tmp_path / "state" / "agents")
    ours_task = f"task-{secrets.token_hex(4)}"
    with leftovers() as left:
        stranger = left.start(SLEEPER)
        ours = left.start(SLEEPER, env={**os.environ, TRACKING_ENV: ours_task})
        left.task_ids.append(ours_task)
        stranger_id, ours_id = identify(stranger.pid), identify(ours.pid)
        assert stranger_id is not None and ours_id is not None
        # The stranger has the recorded pid but not the recorded start time: pid reuse.
        records.put(record_of("stale-task", stranger.pid, stranger_id.start_time - 1))
        records.put(record_of(ours_task, ours.pid, ours_id.start_time))
        async with server_and_api(tmp_path) as (url, _), daemon_process(daemon_env(tmp_path, url)):
            await eventually(lambda: records.records() == [], within=30)
            with anyio.fail_after(10):
                ours_status = await anyio.to_thread.run_sync(ours.wait)
            stranger_alive = is_alive(stranger_id) and stranger.poll() is None
    assert ours_status == -signal.SIGTERM
    assert stranger_alive


ORPHAN_MAKER = """
import json, os, subprocess, sys, time
sys.stdin.read()
flag, pidfile = sys.argv[1], sys.argv[2]
# No tracking tag and its own session, started by a middle process that exits at once: the
# sleeper is orphaned while the agent still runs, and nothing but the daemon adopts it.
env = {k: v for k, v in os.environ.items() if k != "AGENT_DAEMON_TASK_ID"}
spawn = (
    "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c',"
    " 'import time; time.sleep(120)'], start_new_session=True, stdin=subprocess.DEVNULL,"
    " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
)
middle = subprocess.run([sys.executable, "-c", spawn], env=env, capture_output=True, text=True)
with open(pidfile + ".tmp", "w") as fh:
    fh.write(middle.stdout.strip())
os.replace(pidfile + ".tmp", pidfile)
for _ in range(1200):
    if os.path.exists(flag):
        break
    time.sleep(0.05)
print(json.dumps({"type": "result", "output": "left an orphan"}), flush=True)
"""


async def test_an_orphan_the_agent_left_is_adopted_killed_and_reaped(tmp_path: Path) -> None:
    """A process orphaned by the agent is adopted by the daemon, killed with its task, reaped."""
    agent, flag, pidfile = tmp_path / "agent.py", tmp_path / "flag", tmp_path / "orphan.pid"
    agent.write_text(ORPHAN_MAKER)
    env_extra = {
        "MULTICA_COMMAND_PATH": sys.executable,
        "MULTICA_COMMAND_ARGS": f"{agent} {flag} {pidfile}",
    }
    orphan: ProcIdentity | None = None
    try:
        async with (
            server_and_api(tmp_path) as (url, http),
            daemon_process(daemon_env(tmp_path, url, **env_extra, **NO_PID_NAMESPACE)) as daemon,
        ):
            body = {"prompt": "go", "backend": "command"}
            task_id = (await http.post("/api/tasks", json=body)).json()["id"]
            await eventually(pidfile.exists, within=30)
            orphan = identify(int(pidfile.read_text()))
            assert orphan is not None
            adopted = proc_stat(orphan.pid)
            flag.touch()

            async def completed() -> bool:
                return (await get_task(http, task_id))["status"] == "completed"

            await eventually(completed, within=30)

            def reaped() -> bool:
                stat = proc_stat(orphan.pid)
                return stat is None or stat[2] != orphan.start_time

            await eventually(reaped, within=15)
    finally:
        flag.touch()
        if orphan is not None:
            signal_group_of(orphan, signal.SIGKILL)
    assert adopted is not None
    state, ppid, _ = adopted
    assert ppid == daemon.pid and state != "Z"


DETACHER = """
import json, subprocess, sys
sys.stdin.read()
pidfile = sys.argv[1]
# A tool shell detaching a sleeper with a clean environment in its own session, then exiting:
# the sleeper carries no tag and its parent is gone before anyone could see it.
subprocess.run(["sh", "-c", f"env -i setsid sleep 333 & echo $! > {pidfile}"], check=True)
print(json.dumps({"type": "result", "output": "detached a sleeper"}), flush=True)
"""


async def test_a_detached_clean_env_process_dies_with_its_task(tmp_path: Path) -> None:
    """`env -i setsid sleep 333 &` from an agent is gone once its task has ended."""
    agent, pidfile = tmp_path / "agent.py", tmp_path / "sleeper.pid"
    agent.write_text(DETACHER)
    env_extra = {
        "MULTICA_COMMAND_PATH": sys.executable,
        "MULTICA_COMMAND_ARGS": f"{agent} {pidfile}",
        "MULTICA_AGENT_KILL_GRACE": "2s",
    }
    sleeper: ProcIdentity | None = None
    try:
        async with (
            server_and_api(tmp_path) as (url, http),
            daemon_process(daemon_env(tmp_path, url, **env_extra, **NO_PID_NAMESPACE)),
        ):
            body = {"prompt": "go", "backend": "command"}
            task_id = (await http.post("/api/tasks", json=body)).json()["id"]
            await eventually(lambda: bool(pidfile.exists() and pidfile.read_text()), within=30)
            sleeper = identify(int(pidfile.read_text()))
            assert sleeper is not None, "the sleeper never ran"

            async def completed() -> bool:
                return (await get_task(http, task_id))["status"] == "completed"

            await eventually(completed, within=30)
            # Within the kill grace (2 s) after the task ended, with a wide margin.
            await eventually(lambda: not is_alive(sleeper), within=15)
    finally:
        if sleeper is not None:
            signal_group_of(sleeper, signal.SIGKILL)


STUBBORN_TREE = {
    "steps": [
        {"ignore_sigterm": True},
        {"spawn_tree": {"setsid": True, "depth": 1}},
        {"text": "tree started"},
        {"hang": True},
    ]
}
"""An agent that ignores SIGTERM, starts a sleeper in its own session and hangs."""


@pytest.mark.parametrize("env", [{}, NO_PID_NAMESPACE], ids=["contained", "walked"])
async def test_a_crashed_runs_leftovers_get_no_grace_and_hold_no_restart(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """After a crash the next daemon kills the old run's agents outright: with a kill grace
    of a minute and an agent that ignores SIGTERM, the task is settled (and the runtime
    free to claim its retry) long before that grace would have passed."""
    with leftovers() as left:
        async with server_and_api(tmp_path) as (url, http):
            settings = daemon_env(tmp_path, url, MULTICA_AGENT_KILL_GRACE="60s", **env)
            async with daemon_process(settings) as first:
                created = await http.post("/api/tasks", json={"prompt": json.dumps(STUBBORN_TREE)})
                task_id = created.json()["id"]
                left.task_ids.append(task_id)

                async def started() -> bool:
                    messages = (await http.get(f"/api/tasks/{task_id}/messages")).json()
                    return "tree started" in json.dumps(messages)

                await eventually(started, within=20)
                await eventually(lambda: len(tagged(TRACKING_ENV, task_id)) >= 2, within=20)
                tree = tagged(TRACKING_ENV, task_id)
                left.identities += tree
                first.kill()
                with anyio.fail_after(10):
                    await first.wait()
            async with daemon_process(settings):

                async def settled() -> bool:
                    return (await get_task(http, task_id))["status"] in FINAL

                # A safety net far below the minute a graceful kill would have waited.
                await eventually(settled, within=20)
                assert [p.pid for p in tree if is_alive(p)] == []
            assert (await get_task(http, task_id))["failure_reason"] == "runtime_recovery"
