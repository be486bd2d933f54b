"""The daemons the load benchmark measures, each a command and an environment, and the one
agent every one of them runs as its `claude`.

`--daemon NAME=COMMAND` names a daemon (`{python}` in COMMAND is this interpreter); the
default is this project's, `ours={python} -m daemon run`. Each daemon gets a fresh HOME in
which the server's URL and token are written as Multica's CLI keeps them
(`~/.multica/config.json`: what Multica's Go daemon reads), the same values in the variables
this project's daemon reads, and a `claude` first on its PATH and in `MULTICA_CLAUDE_PATH`
that runs `paced_agent.py`. Nothing else of the caller's environment passes, so both daemons
start from the same ground; `--env NAME:KEY=VALUE` adds a variable to one daemon (`*:` to
every one).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.benchmarks.processes import ROOT, TOKEN, free_port

AGENT = Path(__file__).with_name("paced_agent.py")
OURS = "ours={python} -m daemon run"


@dataclass
class Daemon:
    """One daemon to measure: its name, its command line and the variables added for it."""

    name: str
    argv: list[str]
    extra: dict[str, str] = field(default_factory=dict)

    def prepare(
        self, home: Path, url: str, agents: int, ca_bundle: Path | None
    ) -> tuple[dict[str, str], str]:
        """Its environment in `home` for a server at `url` running `agents` tasks at once,
        and the address of its health port (this project's daemon serves /metrics there)."""
        bin_dir, user_home = home / "bin", home / "home"
        for where in (bin_dir, user_home / ".multica", home / "workspaces"):
            where.mkdir(parents=True, exist_ok=True)
        claude = bin_dir / "claude"
        claude.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {AGENT} "$@"\n')
        claude.chmod(0o755)
        config = {"server_url": url, "token": TOKEN}
        (user_home / ".multica" / "config.json").write_text(json.dumps(config))
        health = f"127.0.0.1:{free_port()}"
        env = {
            "HOME": str(user_home),
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "PYTHONPATH": os.environ.get("BENCH_PYTHONPATH", str(ROOT)),
            "MULTICA_SERVER_URL": url,
            "MULTICA_DAEMON_TOKEN": TOKEN,
            "MULTICA_DAEMON_ID": f"bench-{self.name}",
            "MULTICA_CLAUDE_PATH": str(claude),
            "MULTICA_WORKSPACES_ROOT": str(home / "workspaces"),
            "MULTICA_DAEMON_STATE_DIR": str(home / "state"),
            "MULTICA_DAEMON_MAX_CONCURRENT_TASKS": str(agents),
            "MULTICA_DAEMON_HEALTH_ADDR": health,
            "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
            # Agents run as root here against the benchmark's own server: this project's
            # daemon asks to be told so, Multica's hands Claude Code the sandbox flag.
            "MULTICA_AGENT_ALLOW_ROOT": "1",
            "IS_SANDBOX": "1",
            "MULTICA_DAEMON_AUTO_UPDATE": "false",
            "MULTICA_DAEMON_AUTO_RELOAD": "false",
        }
        if ca_bundle is not None:
            env["SSL_CERT_FILE"] = str(ca_bundle)
        env.update(self.extra)
        return env, health


def parse_daemons(specs: list[str], envs: list[str]) -> list[Daemon]:
    """The daemons `--daemon` names (default: ours), with the `--env` variables of each."""
    daemons: list[Daemon] = []
    for spec in specs or [OURS]:
        name, sep, command = spec.partition("=")
        if not sep or not name or not command.strip():
            raise SystemExit(f"--daemon is NAME=COMMAND, not {spec!r}")
        argv = [sys.executable if part == "{python}" else part for part in shlex.split(command)]
        daemons.append(Daemon(name, argv))
    names = {d.name for d in daemons}
    if len(names) != len(daemons):
        raise SystemExit("two daemons have the same name")
    for item in envs:
        name, sep, assignment = item.partition(":")
        key, eq, value = assignment.partition("=")
        if not sep or not eq or not key or (name != "*" and name not in names):
            raise SystemExit(f"--env is NAME:KEY=VALUE with NAME one of {sorted(names)} or *")
        for daemon in daemons:
            if name in ("*", daemon.name):
                daemon.extra[key] = value
    return daemons
