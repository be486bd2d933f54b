"""An agent running as the daemon's user cannot read the daemon's token from /proc, and finds
it in no file of its work directory or HOME."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from daemon.cli.tasks_api import TasksApi
from tests.helpers import (
    FINAL,
    NO_PID_NAMESPACE,
    ROOT,
    TOKEN,
    daemon_env,
    daemon_process,
    embedded_server,
    eventually,
    server_client,
)

pytestmark = pytest.mark.anyio

NOBODY = 65534
AGENT = """
import json, os
daemon = os.getppid()
try:
    with open(f"/proc/{daemon}/environ", "rb") as fh:
        environ = fh.read()
    seen = "read"
except OSError as exc:
    environ, seen = b"", exc.__class__.__name__
report = {"daemon": daemon, "uid": os.getuid(), "environ": seen, "token": b"@TOKEN@" in environ}
print(json.dumps({"type": "result", "output": json.dumps(report)}), flush=True)
""".replace("@TOKEN@", TOKEN)


@dataclass(frozen=True)
class DaemonUser:
    """Where and as whom the daemon runs: its HOME, the command that runs Python as that user,
    the Python its agents run, and the PYTHONPATH that finds the daemon's packages."""

    home: Path
    python: tuple[str, ...]
    agent_python: str
    pythonpath: str
    uid: int


@contextmanager
def unprivileged_daemon_user() -> Iterator[DaemonUser]:
    """An unprivileged user for the daemon and its agents: this one, or `nobody` under root.

    Root reads any /proc entry whatever the daemon does (and, without CAP_SYS_PTRACE, still
    reads a non-dumpable root process's environ here), so only an ordinary user shows the
    defence. `nobody` may not reach this test's own interpreter (e.g. under /root): then the
    same Python version from /usr/bin runs the daemon, with this environment's packages.
    """
    home = Path(tempfile.mkdtemp(prefix="agent-daemon-proc-"))
    packages = sysconfig.get_paths()["purelib"]
    try:
        if os.geteuid() != 0:
            yield DaemonUser(home, (), sys.executable, packages, os.geteuid())
            return
        os.chown(home, NOBODY, NOBODY)
        as_nobody = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        for python in (sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
            if _runs_daemon(as_nobody, python, packages):
                yield DaemonUser(home, (*as_nobody, python), python, packages, NOBODY)
                return
        pytest.skip(f"no {version} that the user nobody may run (setpriv needed)")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _runs_daemon(as_user: tuple[str, ...], python: str, packages: str) -> bool:
    """True when `python`, run as that user, imports the daemon and may start itself again
    (the daemon looks its agent's interpreter up as `command` backend)."""
    if shutil.which("setpriv") is None:
        return False
    env = {"PYTHONPATH": os.pathsep.join((str(ROOT), packages))}
    code = "import daemon.cli.main, shutil, sys; sys.exit(shutil.which(sys.argv[1]) is None)"
    check = [*as_user, python, "-c", code, python]
    return subprocess.run(check, env=env, capture_output=True, check=False).returncode == 0


async def test_an_agent_of_the_same_user_cannot_read_the_daemons_environ(tmp_path: Path) -> None:
    """A real `agent-daemon run` (as an unprivileged user) runs a command agent as that same
    user; the agent's open of /proc/<daemon pid>/environ fails with EACCES, the entry is
    root-owned, and no file under the daemon's HOME, state or work directories holds the token.

    Without `prctl(PR_SET_DUMPABLE, 0)` the same agent reads the environ, token included."""
    with unprivileged_daemon_user() as user:
        home = user.home
        agent = home / "agent.py"
        agent.write_text(AGENT)
        agent.chmod(0o644)
        async with embedded_server(tmp_path / "server.db") as url, server_client(url) as http:
            env = daemon_env(
                home,
                url,
                MULTICA_SCRIPTED_BACKEND="0",
                MULTICA_COMMAND_PATH=user.agent_python,
                MULTICA_COMMAND_ARGS=str(agent),
                PYTHONPATH=user.pythonpath,
                **NO_PID_NAMESPACE,
            )
            async with daemon_process(env, "run", python=user.python) as proc:
                api = TasksApi(http)
                agent_def = {"instructions": "Look around."}  # written into the work dir
                created = await api.create_task("x", backend="command", agent=agent_def)
                task_id = str(created["id"])

                async def ended() -> bool:
                    return (await api.get_task(task_id))["status"] in FINAL

                await eventually(ended, within=60)
                task = await api.get_task(task_id)
                environ_owner = os.stat(f"/proc/{proc.pid}/environ").st_uid
                daemon_uid = _uid_of(proc.pid)
        # The agent script names the token to look for it; every other file must not.
        files = [p for p in home.rglob("*") if p.is_file() and p != agent]
        holding = [p for p in files if TOKEN.encode() in p.read_bytes()]
    assert task["status"] == "completed", task
    report = json.loads(task["output"])
    assert report["daemon"] == proc.pid
    assert report["uid"] == daemon_uid == user.uid
    assert (report["environ"], report["token"]) == ("PermissionError", False)
    # The kernel's mark of a non-dumpable process: its entries belong to root, not its user.
    assert (environ_owner, daemon_uid != 0) == (0, True)
    # Work dir, state dir and ~/.multica seen.
    assert {"AGENTS.md", "daemon.lock", "daemon.id"} <= {p.name for p in files}
    assert holding == []


def test_hiding_makes_the_process_non_dumpable() -> None:
    """`hide_from_agents` clears the dumpable flag, as PR_GET_DUMPABLE reads it back (run in a
    child, so the test process itself stays as it was)."""
    code = (
        "from backends.process.linux import dumpable, hide_from_agents; "
        "before = dumpable(); ok = hide_from_agents(); print(before, ok, dumpable())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.stdout.split() == ["True", "True", "False"]


def _uid_of(pid: int) -> int:
    """The real uid of a live process, from its /proc status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")
