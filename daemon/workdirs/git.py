"""Running `git` for the daemon: a clean environment, a transport policy, a deadline per call.

Every call is a blocking subprocess, made from a worker thread (the health port's request
thread or `anyio.to_thread`), never from the event loop. The child gets the daemon's environment
without any `GIT_*` variable (a `GIT_DIR` or `GIT_CONFIG_*` of the daemon's own shell must not
redirect the cache) and without the daemon's `MULTICA_*` settings and token; it runs in a
session of its own with no terminal and `GIT_TERMINAL_PROMPT=0`, so a missing credential fails
at once instead of waiting on a prompt nobody sees.

Transports: only https, http, ssh, git and file (local users and the tests use `file://` and
plain paths). Every other one is refused by git itself (`protocol.allow=never`), `ext::` — which
runs an arbitrary command — above all; `check_url` refuses it before git is asked.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from backends.process.identity import AgentUser
from daemon.errors import GitError

TIMEOUT = 600.0
"""Seconds a clone or fetch may take (Multica's repo cache allows ten minutes)."""
SHORT_TIMEOUT = 60.0
"""Seconds a local command (rev-parse, worktree add, status) may take."""
_KILL_WAIT = 5.0
_OUTPUT_SHOWN = 1000
_ALLOWED_TRANSPORTS = ("https", "http", "ssh", "git", "file")
# `<helper>::<address>` makes git run `git-remote-<helper>`; `ext::` runs any command.
_REMOTE_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")

POLICY: tuple[str, ...] = (
    "-c",
    "protocol.allow=never",
    *(arg for name in _ALLOWED_TRANSPORTS for arg in ("-c", f"protocol.{name}.allow=always")),
    # The daemon's own git calls run no hook and no filesystem monitor, whatever a repository's
    # configuration (an agent can edit its worktree's) says.
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
)


def redact(text: str) -> str:
    """`text` (a URL, or git's words about one) without the `user:password@` of any URL in it:
    a repository URL may carry a token, and logs and answers must not."""
    return _USERINFO.sub(r"\1", text)


def check_url(url: str) -> str | None:
    """Why `url` may not reach git (None when it may): an option, a control character, a
    remote helper."""
    if not url:
        return "url is required"
    if url.startswith("-"):
        return "url must not start with '-'"
    if _CONTROL.search(url):
        return "url must not contain control characters"
    if _REMOTE_HELPER.match(url):
        return "url must not name a remote helper (`<transport>::`)"
    return None


def check_ref(ref: str) -> str | None:
    """Why `ref` may not reach git (None when it may, or when it is empty)."""
    if ref.startswith("-"):
        return "ref must not start with '-'"
    if _CONTROL.search(ref) or " " in ref:
        return "ref must not contain spaces or control characters"
    return None


def git_env(base: Mapping[str, str]) -> dict[str, str]:
    """`base` without git's and the daemon's own variables, with prompts turned off."""
    env = {
        k: v
        for k, v in base.items()
        if not k.upper().startswith(("GIT_", "MULTICA_")) and k != "NOTIFY_SOCKET"
    }
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["SSH_ASKPASS_REQUIRE"] = "never"
    return env


class Git:
    """Runs git commands with the daemon's policy; `stop()` ends every one still running."""

    def __init__(self, base_env: Mapping[str, str], executable: str = "git") -> None:
        self._env = git_env(base_env)
        self._executable = shutil.which(executable, path=base_env.get("PATH") or None)
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()
        self._stopped = False
        self._user: AgentUser | None = None
        self._trusted: tuple[str, ...] = ()
        self.upload_pack: tuple[str, ...] = ()
        """Options of a clone or fetch from the daemon's cache (see `acting_as`)."""

    def acting_as(self, user: AgentUser | None, trusting: Path) -> Git:
        """This git, run as `user` (an agent user's, for its own checkout), trusting the
        daemon's repository `trusting` to read from; itself when `user` is None. `stop()`
        reaches the commands of both."""
        if user is None:
            return self
        other = copy.copy(self)  # the lock and the running set stay shared
        other._user = user
        other._env = user.environ(self._env)
        # The cache belongs to the daemon's user: git reads another user's repository only
        # when told to trust it, on the command line or in a protected config. The upload-pack
        # a local clone or fetch starts gets no `-c` of ours (git clears them for it), so it is
        # told on its own command line, which git runs through the shell.
        other._trusted = ("-c", f"safe.directory={trusting}")
        pack = [self._executable or "git", "-c", f"safe.directory={trusting}", "upload-pack"]
        other.upload_pack = ("--upload-pack", shlex.join(pack))
        return other

    @property
    def available(self) -> bool:
        """True when the git executable was found on the PATH."""
        return self._executable is not None

    def run(
        self,
        args: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float = SHORT_TIMEOUT,
        strip: bool = True,
    ) -> str:
        """git's stdout (stripped, unless `strip` is False: a `-z` list, whose names may begin
        or end with a space) for `args`; GitError with git's own words when it fails."""
        if self._executable is None:
            raise GitError("git is not installed (not found on the PATH)")
        argv = [self._executable, *POLICY, *self._trusted, *args]
        shown = " ".join(args[:2])
        proc = self._start(argv, cwd)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise GitError(f"git {shown}: timed out after {timeout:g}s") from None
        finally:
            with self._lock:
                self._running.discard(proc)
        if proc.returncode != 0:
            said = redact((err or out).decode(errors="replace").strip())[-_OUTPUT_SHOWN:]
            raise GitError(f"git {shown}: {said or f'exit status {proc.returncode}'}")
        # A raw list keeps any name's bytes (os.fsencode gives them back); text is readable.
        return out.decode(errors="replace").strip() if strip else os.fsdecode(out)

    def ok(self, args: Sequence[str], *, cwd: Path | None = None) -> bool:
        """True when the command succeeds (a question asked of git, e.g. `rev-parse --verify`)."""
        try:
            self.run(args, cwd=cwd)
        except GitError:
            return False
        return True

    def stop(self) -> None:
        """Kill every git still running and refuse new ones (the daemon is stopping)."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            _kill(proc)

    def _start(self, argv: list[str], cwd: Path | None) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._stopped:
                raise GitError("the daemon is stopping")
            user = self._user
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=self._env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    # No controlling terminal: ssh cannot prompt for a passphrase or host key.
                    start_new_session=True,
                    # As the agent user for its own checkout: as `AgentUser.spawn_options`.
                    user=None if user is None else user.uid,
                    group=None if user is None else user.gid,
                    extra_groups=None if user is None else list(user.groups),
                )
            except OSError as exc:
                raise GitError(f"git could not start: {exc}") from exc
            self._running.add(proc)
        return proc


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the git and whatever it started (ssh, a credential helper): its whole session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=_KILL_WAIT)
