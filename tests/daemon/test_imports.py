"""What the daemon's entry point loads: the embedded server's libraries only where it runs,
httpx's command-line client nowhere.

Each import costs memory for the daemon's whole life: uvicorn, starlette, SQLite and the
server's own modules cost a daemon that talks to a remote server about 4 MB it never uses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backends.scripted import Script
from tests.fakes.multica_server import multica_server
from tests.helpers import ROOT, daemon_env, daemon_process

SERVER_ONLY = ("uvicorn", "starlette", "sqlite3", "daemon.server.serve", "daemon.server.app")


def _loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    script = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout))


def _server_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m in SERVER_ONLY or m.split(".")[0] in SERVER_ONLY)


def test_the_daemon_and_submit_load_none_of_the_servers_libraries() -> None:
    loaded = _loaded_after("import daemon.cli.main, daemon.cli.submit")
    assert "daemon.server.token" in loaded  # the token file is read without the server
    assert _server_modules(loaded) == []


def test_the_daemon_leaves_out_httpx_command_line_client() -> None:
    """httpx's own CLI (click, pygments) stays out although click is installed for uvicorn."""
    loaded = _loaded_after("import daemon.cli.main, httpx; assert callable(httpx.main)")
    assert "click" not in loaded
    assert "pygments" not in loaded


@pytest.mark.anyio
async def test_a_daemon_serving_a_remote_server_never_loads_the_servers_libraries(
    tmp_path: Path,
) -> None:
    """Up, registered, a task run and reported against the Multica-faithful server, stopped:
    no module of the embedded server was imported on the way (`-X importtime` lists each)."""
    log = tmp_path / "daemon.log"
    python = (sys.executable, "-X", "importtime")
    script = Script().text("hi").result("done").dumps()
    async with (
        multica_server() as fake,
        daemon_process(daemon_env(tmp_path, fake.url), log=log, python=python) as run,
    ):
        task_id = fake.queue_comment(script)
        assert (await fake.finished(task_id, within=30)).status == "completed"
        run.terminate()
        await run.wait()
    imported = {
        line.split("|")[2].strip()
        for line in log.read_text().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "daemon.task.run" in imported  # the whole run was seen
    assert _server_modules(imported) == []
