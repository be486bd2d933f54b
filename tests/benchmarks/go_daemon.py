"""Multica's Go daemon, built by hand from its source, run the way these benchmarks run this
project's: `multica --profile NAME daemon start --foreground` with its auto-update and
auto-reload off, the server's URL and a token in that profile's config (what Multica's CLI
keeps after `multica login`), HOME its own. A named profile gives it a health port of its own
(Multica derives the port from the name), so it never meets a daemon on the default one."""

from __future__ import annotations

import json
from pathlib import Path

PROFILE = "bench-go"
TOKEN = "bench-go-token"


def go_daemon(binary: str, home: Path, url: str) -> tuple[list[str], dict[str, str]]:
    """The command line and the variables that run the Go daemon at `binary` against the
    server at `url`, its state under `home` (made here); the caller adds what its agents
    need (PATH, the CLIs' paths, their API's address)."""
    profile = home / ".multica" / "profiles" / PROFILE
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "config.json").write_text(json.dumps({"server_url": url, "token": TOKEN}))
    argv = [binary, "--profile", PROFILE, "daemon", "start", "--foreground"]
    argv += ["--no-auto-update", "--no-auto-reload"]
    env = {
        "HOME": str(home),
        "MULTICA_SERVER_URL": url,
        "MULTICA_WORKSPACES_ROOT": str(home / "workspaces"),
        "MULTICA_DAEMON_AUTO_UPDATE": "false",
        "MULTICA_DAEMON_AUTO_RELOAD": "false",
    }
    return argv, env
