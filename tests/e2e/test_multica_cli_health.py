"""`multica daemon stop` and `multica daemon status` against this daemon's health port, read the
way Multica's CLI reads it (tests/fakes/multica_cli.py): a daemon finishing its running task
is still stopping, never "stopped", and its version is the one the server sees."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from backends.scripted import Script
from daemon.protocol.release import cli_version
from tests.daemon_child import daemon_child, run_cli
from tests.fakes import multica_cli
from tests.fakes.multica_server import multica_server
from tests.helpers import daemon_env, eventually

pytestmark = pytest.mark.anyio

WORKING = Script().text("working").hang().dumps()


async def test_a_daemon_finishing_its_task_is_still_stopping_for_multicas_cli(
    tmp_path: Path,
) -> None:
    """While it drains its running task, `multica daemon stop` says it is still stopping and
    `multica daemon status` that it runs, with the server's version; `agent-daemon status`
    says stopping. Gone, both say so."""
    async with multica_server() as fake:
        # A grace far longer than the test: the drain ends when the test says (a second stop).
        env = daemon_env(tmp_path, fake.url, MULTICA_DAEMON_SHUTDOWN_GRACE="10m")
        async with daemon_child(env) as child:
            port = int(child.health_url.rsplit(":", 1)[1])
            task_id = fake.queue_comment(WORKING)
            await eventually(
                lambda: any(m["content"] == "working" for m in fake.messages_of(task_id)),
                within=30,
            )
            # A document is published on the health port's tick after the daemon's stage
            # changes: the CLI reads `running` from then on.
            await eventually(lambda: _says_running(port), within=10)
            running = await multica_cli.status(port)
            stopping = await multica_cli.stop(port, every=0.05)
            draining = await multica_cli.status(port)
            code, ours, _ = await run_cli("status", "--addr", f"127.0.0.1:{port}", env=env)
            child.process.send_signal(signal.SIGTERM)  # the second: cancel the task now
            assert await child.stop() == 0
            gone = await multica_cli.stop(port)
            after = await multica_cli.status(port)
    pid = child.process.pid
    assert running[0] == f"Daemon:      running (pid {pid}, uptime {running[0].split()[-1]}"
    assert f"Version:     {cli_version()}" in running
    assert stopping == [f"Stopping daemon (pid {pid})...", multica_cli.STILL_STOPPING]
    assert draining[0].startswith(f"Daemon:      running (pid {pid},")
    assert code == 0 and " stopping " in ours.splitlines()[0]
    assert (gone, after) == (["Daemon is not running."], ["Daemon: stopped"])
    assert fake.tasks[task_id].status == "failed"  # cancelled by the second stop, reported


async def _says_running(port: int) -> bool:
    return (await multica_cli.health(port)).get("status") == "running"


async def test_an_idle_daemon_is_stopped_for_multicas_cli(tmp_path: Path) -> None:
    """Nothing to finish: the daemon exits within the CLI's polls and the CLI says so."""
    async with multica_server() as fake, daemon_child(daemon_env(tmp_path, fake.url)) as child:
        port = int(child.health_url.rsplit(":", 1)[1])
        await eventually(lambda: bool(fake.live_runtimes()), within=30)
        lines = await multica_cli.stop(port)
        assert await child.stop() == 0
    assert lines == [f"Stopping daemon (pid {child.process.pid})...", "Daemon stopped."]
