"""A throw-away account in the machine's password database, for the agent-user tests.

Creating one needs root, as CI has: without it the tests that need one fail with a line that
says so (they are marked `root`), never pass quietly.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backends.process.identity import AgentUser

AGENT_USER_CAPABILITIES = ("SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "KILL", "SYS_PTRACE")
"""All a root daemon with an agent user needs: the deploy files grant exactly these, and the
end-to-end tests run their daemon with no others."""


def with_only(capabilities: tuple[str, ...]) -> tuple[str, ...]:
    """The `setpriv` prefix that runs a command with no capabilities but `capabilities`."""
    keep = ",".join(f"+{c.lower()}" for c in capabilities)
    return ("setpriv", "--bounding-set", f"-all,{keep}")


def require_root() -> None:
    """Fail the test, loudly, where it cannot run: not root, or no `useradd`."""
    if os.geteuid() != 0:
        raise AssertionError("this test starts agents as another user: run it as root (CI does)")
    if shutil.which("useradd") is None:
        raise AssertionError("this test creates a user: install `useradd` (package passwd)")


def agent_python() -> str:
    """A Python interpreter any user may run (the test's own lives under root's 0700 home):
    the system's, from the system's directories."""
    found = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if found is None or not os.stat(found).st_mode & 0o001:
        raise AssertionError("this test runs Python as an agent user: install python3 system-wide")
    return found


@contextmanager
def system_user(*, create_home: bool = True) -> Iterator[AgentUser]:
    """A new system user with a unique name (and its home); removed with its home after."""
    require_root()
    name = f"ad-{secrets.token_hex(5)}"
    home_flag = "--create-home" if create_home else "--no-create-home"
    subprocess.run(["useradd", "--system", home_flag, name], check=True, capture_output=True)
    try:
        entry = pwd.getpwnam(name)
        groups = tuple(os.getgrouplist(name, entry.pw_gid))
        yield AgentUser(name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)
    finally:
        subprocess.run(["userdel", "--force", "--remove", name], check=False, capture_output=True)
        subprocess.run(["groupdel", name], check=False, capture_output=True)


@contextmanager
def passable_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory in the system temp dir that any user may pass through (0711) — the
    test's own tmp_path sits below an owner-only directory no agent user could enter."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        path.chmod(0o711)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
