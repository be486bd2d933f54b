"""MULTICA_AGENT_USER: the account a root daemon runs every agent as, checked at start-up.

A root daemon's agents would otherwise run as root and read everything of the daemon: its
environment in /proc (the token), the state directory (`server.db`, `server.token`, the
outbox). With an agent user each agent process starts as that user (`backends.process`
switches it between fork and exec), its task's directories are handed to it, and the daemon's
own files stay root's.

The workspaces root and the per-workspace directories are root's and `0711`: the agent user
can pass through them to the task directory it was told (its own, `0700`), but cannot list
them to find the others. Mode bits rather than a group: it needs no group of the agent's own
(a numeric uid may have none) and changes nothing for other users, who still stop at the
task directories.
"""

from __future__ import annotations

import logging
import os
import pwd
import stat
from pathlib import Path

from backends.process.identity import AgentUser
from backends.process.linux import forbid_privilege_gain
from daemon.errors import ConfigError
from daemon.files import ensure_dir

log = logging.getLogger(__name__)

VAR = "MULTICA_AGENT_USER"
SHARED_DIR_MODE = 0o711
"""The workspaces root and each workspace's directory: traversable, not listable."""


def resolve(raw: str, workspaces_root: Path, euid: int | None = None) -> AgentUser | None:
    """The agent user named by `raw` (a name or a numeric uid), or None to run agents as the
    daemon's own user (`raw` empty, or naming that user). Raises `ConfigError`, naming the
    variable, when the user is unknown, its home is missing, the daemon cannot switch to it
    (not root), or it could not reach the workspaces root."""
    name = raw.strip()
    if not name:
        return None
    me = os.geteuid() if euid is None else euid
    try:
        entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, OverflowError):
        raise ConfigError(f"{VAR}={raw!r} is invalid: no such user on this machine") from None
    if entry.pw_uid == me:
        return None  # the daemon's own user: agents run as they always did
    if me != 0:
        raise ConfigError(
            f"{VAR}={raw!r} is invalid: the daemon runs as uid {me}, not root, so it cannot "
            "start agents as another user"
        )
    if not entry.pw_dir or not os.path.isdir(entry.pw_dir):
        raise ConfigError(
            f"{VAR}={raw!r} is invalid: its home directory {entry.pw_dir!r} does not exist"
        )
    groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    user = AgentUser(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)
    _check_reachable(workspaces_root, user)
    return user


def take_over(user: AgentUser, workspaces_root: Path) -> None:
    """Make the daemon ready to start agents as `user`: no privilege gains by exec from here
    on, and a workspaces root the user can pass through but not list.

    Raises `ConfigError` when the root is out of the user's reach after all (a directory on
    the way was created owner-only since start-up, such as the state directory)."""
    forbid_privilege_gain()
    root = Path(os.path.abspath(workspaces_root))
    created = [d for d in (root, *root.parents) if not d.exists()]
    ensure_dir(root)
    for directory in created:
        # Owner-only as the daemon creates directories; the agent user must pass through.
        os.chmod(directory, SHARED_DIR_MODE)
    open_to_pass(root)
    _check_reachable(root, user)
    log.info(
        "agents run as user %s (uid %d, gid %d, home %s)",
        user.name,
        user.uid,
        user.gid,
        user.home,
    )


def open_to_pass(directory: Path) -> None:
    """Let anyone pass through a directory of the daemon's that is owner-only (one made before
    agents had a user of their own); others' directories and their modes are left alone."""
    info = directory.stat()
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid == os.geteuid() and mode & 0o011 != 0o011:
        os.chmod(directory, mode | 0o011)


def _check_reachable(root: Path, user: AgentUser) -> None:
    blocked = _first_closed(root, user)
    if blocked is not None:
        mode = stat.S_IMODE(blocked.stat().st_mode)
        raise ConfigError(
            f"MULTICA_WORKSPACES_ROOT={str(root)!r} is invalid: {VAR}={user.name} cannot "
            f"pass through {blocked} (mode {mode:04o}); choose a root that user can reach, "
            "outside the state directory"
        )


def _first_closed(root: Path, user: AgentUser) -> Path | None:
    """The first existing directory on the way to `root` that `user` may not pass through.

    The root itself is left out when the daemon owns it: `take_over` opens it."""
    path = Path(os.path.abspath(root))
    ways = [*reversed(path.parents)]
    if path.exists() and path.stat().st_uid != os.geteuid():
        ways.append(path)
    for directory in ways:
        try:
            info = directory.stat()
        except FileNotFoundError:
            return None  # created by the daemon below here, passable
        if not _may_pass(info, user):
            return directory
    return None


def _may_pass(info: os.stat_result, user: AgentUser) -> bool:
    """Whether `user` has search permission on a directory, by its mode bits."""
    if info.st_uid == user.uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid in user.groups:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)
