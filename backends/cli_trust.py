"""Whether an agent CLI is root's to change alone: what a daemon with an agent user may run.

A CLI an agent can rewrite (installed in that user's home, a directory it can write on the
way, an interpreter of its own) is the agent's code. A root daemon that ran it for a
`--version` probe would run the agent's code as root; a pool that ran it for another task
would hand one task's code to the next uid. So with an agent user an executable is taken only
when, as OpenSSH's StrictModes asks of `authorized_keys`, nobody but root (or the daemon's own
user) can change it: the file and every directory on its resolved path are owned by one of
them and writable by neither group nor others, every link on the way is theirs, and so is the
interpreter its `#!` line names (`#!/usr/bin/env node`: `env`, and `node` as the PATH finds
it), and every directory on PATH the lookup passes first (a `claude` planted in one ahead
would be found instead). A sticky directory (`/tmp`) is passed through when the entry in it is
trusted: nobody else can rename or remove that entry. Access control lists are not read.

The check follows the path one component at a time (`lstat`, `readlink`), so a link is judged
where it sits before its target is, and nothing is executed or opened but the trusted file's
first line. `refusal` says why not in one sentence that names the path.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Collection

MAX_LINKS = 40
"""Links one resolution follows at most (the kernel's own limit)."""
MAX_INTERPRETERS = 4
"""`#!` lines followed at most, as Linux runs at most four nested interpreters."""
_SHEBANG_BYTES = 256


class UntrustedCliError(PermissionError):
    """An agent CLI someone other than root could change: not run, and not offered."""


def trusted_uids() -> frozenset[int]:
    """Root and the daemon's own user: the only ones whose files the daemon may run."""
    return frozenset({0, os.geteuid()})


def refusal(command: str, search_path: str, trusted: Collection[int] | None = None) -> str | None:
    """None when `command` (a path, or a name looked up on `search_path`) is changed by no
    one but `trusted` (default: `trusted_uids()`); else why not, naming the path."""
    owners = frozenset(trusted_uids() if trusted is None else trusted)
    try:
        return _executable(command, search_path, owners, MAX_INTERPRETERS)
    except OSError as exc:
        return f"{exc.filename or command} cannot be checked: {exc.strerror or exc}"


def _executable(command: str, search_path: str, owners: frozenset[int], depth: int) -> str | None:
    if os.sep in command:
        if not os.path.isabs(command):
            return f"{command} is a relative path, resolved in a directory the agent may own"
        found: str | None = command
    else:
        found, why = _lookup(command, search_path, owners)
        if why is not None:
            return why
    if found is None:
        return None  # nothing to run: the probe says it is not there
    resolved, why = _resolve(found, owners)
    if why is not None:
        return why
    if resolved is None:
        return None
    info = os.stat(resolved, follow_symlinks=False)
    if not stat.S_ISREG(info.st_mode):
        return f"{resolved} is not a regular file"
    return _interpreter(resolved, search_path, owners, depth)


def _lookup(name: str, search_path: str, owners: frozenset[int]) -> tuple[str | None, str | None]:
    """(where PATH finds `name`, None) or (None, why a directory the lookup passes is not
    trusted); (None, None) when no directory holds it."""
    for entry in search_path.split(os.pathsep):
        if not os.path.isabs(entry):
            return None, f"PATH holds the relative directory {entry!r}, ahead of {name}"
        resolved, why = _resolve(entry, owners)
        if why is not None:
            return None, f"{why} (a directory on PATH, searched for {name})"
        if resolved is None:
            continue
        candidate = os.path.join(resolved, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.join(entry, name), None
    return None, None


def _resolve(path: str, owners: frozenset[int]) -> tuple[str | None, str | None]:
    """(the real path, None) when every component of the absolute `path` is trusted, through
    its links; (None, why) at the first that is not; (None, None) when a component is
    missing below trusted directories (nobody else could make it)."""
    why = _untrusted("/", os.stat("/"), owners)
    if why is not None:
        return None, why
    pending = _parts(path)
    current = "/"
    links = 0
    while pending:
        name = pending.pop()
        if name == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, name)
        try:
            info = os.stat(candidate, follow_symlinks=False)
        except FileNotFoundError:
            return None, None
        why = _untrusted(candidate, info, owners)
        if why is not None:
            return None, why
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_LINKS:
                return None, f"{path} passes more than {MAX_LINKS} links"
            target = os.readlink(candidate)
            if os.path.isabs(target):
                current = "/"
            pending.extend(_parts(target))
            continue
        current = candidate
    return current, None


def _parts(path: str) -> list[str]:
    """The components of `path`, last first (a stack), without the empty and `.` ones."""
    return [p for p in reversed(path.split("/")) if p not in ("", ".")]


def _untrusted(path: str, info: os.stat_result, owners: frozenset[int]) -> str | None:
    """Why someone outside `owners` could change `path` (as `info` shows it), or None."""
    if info.st_uid not in owners:
        return f"{path} is owned by {_user(info.st_uid)}, not root"
    if stat.S_ISLNK(info.st_mode):
        return None  # a link's own mode means nothing; its directory was judged
    if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX:
        return None  # sticky: others may add entries, never touch the trusted ones
    if info.st_mode & stat.S_IWOTH:
        return f"{path} is writable by every user (mode {stat.S_IMODE(info.st_mode):04o})"
    if info.st_mode & stat.S_IWGRP:
        mode = stat.S_IMODE(info.st_mode)
        return f"{path} is writable by its group, gid {info.st_gid} (mode {mode:04o})"
    return None


def _user(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _interpreter(path: str, search_path: str, owners: frozenset[int], depth: int) -> str | None:
    """Why the interpreter the `#!` line of the trusted file `path` names is not trusted."""
    # Every directory to `path` is trusted: the name is root's to change, the read is safe.
    with open(path, "rb") as fh:
        head = fh.read(_SHEBANG_BYTES)
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if depth <= 0:
        return f"{path} nests interpreters deeper than {MAX_INTERPRETERS}"
    interpreter, args = words[0], words[1:]
    if not os.path.isabs(interpreter):
        return f"{path} names the relative interpreter {interpreter!r}"
    why = _executable(interpreter, search_path, owners, depth - 1)
    if why is not None or os.path.basename(interpreter) != "env":
        return why
    program = _env_program(args)
    if program is None:
        return None
    return _executable(program, search_path, owners, depth - 1)


_ENV_VALUE_OPTIONS = frozenset({"-u", "--unset", "-C", "--chdir"})


def _env_program(args: list[str]) -> str | None:
    """The program `env` runs: its first word that is no option (nor an option's value) and
    no `NAME=value` (`-S` splits the rest into words, as the line already is)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _ENV_VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-") and "=" not in arg:
            return arg
    return None
