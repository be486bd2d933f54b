"""A daemon started with nothing but Multica's own files: `~/.multica/config.json` and
`daemon.id` say where to connect, as whom, and under which daemon id."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fakes.multica_server import multica_server
from tests.helpers import daemon_process, eventually

pytestmark = pytest.mark.anyio
KNOWN = "0190f5e2-7c1a-7d3e-9b2a-1f2e3d4c5b6a"


def bare_env(home: Path) -> dict[str, str]:
    """No server URL, no token, no daemon id: only what a test daemon needs besides."""
    return {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "MULTICA_DAEMON_STATE_DIR": str(home / "state"),
        "MULTICA_DAEMON_HEALTH_ADDR": "127.0.0.1:0",
        "MULTICA_DAEMON_POLL_INTERVAL": "100ms",
        "MULTICA_SCRIPTED_BACKEND": "1",
        "MULTICA_CLAUDE_PATH": str(home / "no-claude"),
        "MULTICA_CODEX_PATH": str(home / "no-codex"),
    }


async def test_the_multica_login_and_daemon_id_are_reused(tmp_path: Path) -> None:
    """config.json gives the server, token, device and work root; daemon.id the identity."""
    multica = tmp_path / ".multica"
    multica.mkdir()
    (multica / "daemon.id").write_text(KNOWN + "\n")
    async with multica_server(token="mul_login") as fake:
        login = {
            "server_url": fake.url,
            "token": "mul_login",
            "device_name": "laptop",
            "workspaces_root": str(tmp_path / "mw"),
        }
        (multica / "config.json").write_text(json.dumps(login))
        async with daemon_process(bare_env(tmp_path)) as proc:
            await eventually(lambda: bool(fake.live_runtimes()), within=30)
            task_id = fake.queue_issue()
            await eventually(lambda: fake.tasks[task_id].status == "completed", within=30)
            proc.terminate()
    (runtime,) = fake.live_runtimes()
    assert runtime.daemon_id == KNOWN
    assert fake.seen("register")[0].body["device_name"] == "laptop"
    assert Path(fake.tasks[task_id].work_dir).is_relative_to(tmp_path / "mw")


async def test_an_earlier_state_dir_id_carries_over_and_is_kept_by_multica(
    tmp_path: Path,
) -> None:
    """With no `~/.multica/daemon.id`, the state dir's older id registers and is saved there."""
    (tmp_path / "state").mkdir(mode=0o700)
    (tmp_path / "state" / "daemon_id").write_text(KNOWN + "\n")
    async with multica_server() as fake:
        env = {**bare_env(tmp_path), "MULTICA_SERVER_URL": fake.url}
        async with daemon_process(env) as proc:
            await eventually(lambda: bool(fake.live_runtimes()), within=30)
            proc.terminate()
    assert {r.daemon_id for r in fake.runtimes.values()} == {KNOWN}
    assert (tmp_path / ".multica" / "daemon.id").read_text().strip() == KNOWN
