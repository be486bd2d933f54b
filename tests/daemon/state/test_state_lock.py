"""One daemon per state directory: a second one exits 1 naming the holder and changes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import httpx
import pytest

from daemon.cli.tasks_api import TasksApi
from daemon.errors import AlreadyRunningError
from daemon.state.lock import state_dir_lock
from tests.daemon_child import daemon_child, run_cli
from tests.helpers import daemon_env, embedded_server, eventually, server_client

pytestmark = pytest.mark.anyio


def tree(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under `root` with its size, mtime (ns) and mode."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_mode)
        for p in sorted(root.rglob("*"))
    }


def test_a_second_holder_in_this_process_is_refused_naming_the_pid(tmp_path: Path) -> None:
    """The lock file holds the holder's pid; a second lock on the directory is refused."""
    with state_dir_lock(tmp_path / "state"):
        pid = (tmp_path / "state" / "daemon.lock").read_text().strip()
        refused = pytest.raises(AlreadyRunningError, match=f"pid {os.getpid()}.*{tmp_path}")
        with refused, state_dir_lock(tmp_path / "state"):
            pass
    assert pid == str(os.getpid())
    with state_dir_lock(tmp_path / "state"):  # released on exit: taken again at once
        pass


async def test_second_daemon_on_the_same_state_dir_exits_1_and_touches_nothing(
    tmp_path: Path,
) -> None:
    """Another health address does not help: same state dir, one line with the pid, exit 1."""
    async with embedded_server(tmp_path / "server.db") as url:
        env = daemon_env(tmp_path / "home", url)
        async with daemon_child(env) as first:
            state = Path(env["MULTICA_DAEMON_STATE_DIR"])
            async with httpx.AsyncClient(base_url=first.health_url, timeout=5) as probe:

                async def ready() -> bool:
                    return (await probe.get("/readyz")).status_code == 200

                await eventually(ready)
            before = tree(state)
            code, _, err = await run_cli(
                "run", env={**env, "MULTICA_DAEMON_HEALTH_ADDR": "127.0.0.1:0"}, within=20
            )
            after = tree(state)
            async with httpx.AsyncClient(base_url=first.health_url, timeout=5) as http:
                live = await http.get("/healthz")
            async with server_client(url) as user:
                task_id = (await TasksApi(user).create_task("hi", backend="scripted"))["id"]
                async with server_client(url) as poll:
                    for _ in range(600):
                        status = (await TasksApi(poll).get_task(task_id))["status"]
                        if status == "completed":
                            break
                        await anyio.sleep(0.05)
            stopped = await first.stop()
    assert code == 1
    assert err.strip().splitlines() == [
        f"agent-daemon: another daemon (pid {first.process.pid}) is already running on the "
        f"state directory {state}; stop it, or set MULTICA_DAEMON_STATE_DIR to another directory"
    ]
    assert after == before
    assert live.status_code == 200
    assert status == "completed"
    assert stopped == 0
