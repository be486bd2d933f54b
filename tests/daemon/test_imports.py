"""What the daemon's entry point loads: the embedded server's libraries only where it runs,
httpx's command-line client nowhere.

Each import costs memory for the daemon's whole life: uvicorn, starlette, SQLite and the
server's own modules cost a daemon that talks to a remote server about 4 MB it never uses.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT

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
