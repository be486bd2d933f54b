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
from daemon.files.private import ensure_dir

log = logging.getLogger(__name__)

VAR = "MULTICA_AGENT_USER"
ALLOW_ROOT_VAR = "MULTICA_AGENT_ALLOW_ROOT"
SHARED_DIR_MODE = 0o711
"""The workspaces root and each workspace's directory: traversable, not listable."""


def resolve(raw: str, euid: int | None = None) -> AgentUser | None:
    """The agent user named by `raw` (a name or a numeric uid), or None to run agents as the
    daemon's own user (`raw` empty, or naming that user). Raises `ConfigError`, naming the
    variable, when the user is unknown, the daemon cannot switch to it (not root) or its home
    is missing."""
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
    return AgentUser(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)


def refuse_root_agents(
    identity: AgentUser | None, *, embedded: bool, allowed: bool, euid: int | None = None
) -> str | None:
    """Stop a root daemon of a remote server from running its agents as root unless the
    operator said so: such an agent reads the daemon's token (its environ, the state
    directory) and with it a team's whole workspace, as GitHub's runner refuses root without
    `RUNNER_ALLOW_RUNASROOT`. The embedded server holds only this machine's tasks: there a
    warning is enough. Returns the warning to log once the daemon runs (None: nothing to
    say); raises `ConfigError` (one line, exit 2)."""
    me = os.geteuid() if euid is None else euid
    if me != 0 or identity is not None:
        return None
    if embedded:
        return (
            f"agents run as root and can read everything of the daemon; set {VAR} to run "
            "them as an unprivileged user"
        )
    if allowed:
        return (
            f"agents run as root ({ALLOW_ROOT_VAR}=1): they can read the daemon's token and "
            "every task"
        )
    raise ConfigError(
        f"refusing to run agents as root for a remote server (they could read the daemon's "
        f"token): set {VAR} to an unprivileged user, or {ALLOW_ROOT_VAR}=1 to accept it"
    )


def take_over(user: AgentUser, workspaces_root: Path, state_dir: Path) -> None:
    """Make the daemon ready to start agents as `user` (call it holding the state directory):
    no privilege gains by exec from here on, the state directory owner-only (0700), and a
    workspaces root the user can pass through but not list (0711).

    Raises `ConfigError` when the user could not reach the root, or could move the root or
    the state directory aside (a directory above one of them that it may write)."""
    forbid_privilege_gain()
    root = Path(os.path.abspath(workspaces_root))
    created = [d for d in (root, *root.parents) if not d.exists()]
    ensure_dir(root)
    for directory in created:
        # Owner-only as the daemon creates directories; the agent user must pass through.
        os.chmod(directory, SHARED_DIR_MODE)
    # Modes are set, not kept: a mounted volume comes as 0777, and these two are the
    # boundary between the daemon and its agents.
    state = ensure_dir(Path(os.path.abspath(state_dir)))
    _own_mode(root, SHARED_DIR_MODE)
    _own_mode(state, 0o700)
    _check_ways(root, state, user)
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


def _own_mode(directory: Path, mode: int) -> None:
    """`directory` set to `mode` when it is the daemon's (another owner's is checked only)."""
    if directory.stat().st_uid == os.geteuid():
        os.chmod(directory, mode)


def _check_ways(root: Path, state_dir: Path, user: AgentUser) -> None:
    for way in (*reversed(root.parents), root):
        info = way.stat()
        if not _may(info, user, stat.S_IXUSR):
            mode = stat.S_IMODE(info.st_mode)
            raise ConfigError(
                f"MULTICA_WORKSPACES_ROOT={str(root)!r} is invalid: {VAR}={user.name} cannot "
                f"pass through {way} (mode {mode:04o}); choose a root that user can reach, "
                "outside the state directory"
            )
    for var, path in (("MULTICA_WORKSPACES_ROOT", root), ("MULTICA_DAEMON_STATE_DIR", state_dir)):
        for above in path.parents:
            info = above.stat()
            # In a sticky directory (/tmp) a user may not move what is not its own.
            if _may(info, user, stat.S_IWUSR) and not info.st_mode & stat.S_ISVTX:
                raise ConfigError(
                    f"{var}={str(path)!r} is invalid: {VAR}={user.name} may write {above}, "
                    "so it could move the directory aside; choose a parent it cannot write"
                )


def _may(info: os.stat_result, user: AgentUser, owner_bit: int) -> bool:
    """Whether `user` has the permission whose owner bit is `owner_bit` (S_IXUSR, S_IWUSR)
    on a file, by its mode bits: the owner's, the group's or everyone's, as for the kernel."""
    if info.st_uid == user.uid:
        return bool(info.st_mode & owner_bit)
    if info.st_gid in user.groups:
        return bool(info.st_mode & (owner_bit >> 3))
    return bool(info.st_mode & (owner_bit >> 6))
