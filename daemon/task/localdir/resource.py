"""Which `local_directory` resource of a task is this daemon's, and whether its folder may be
worked in.

As Multica's daemon checks it: the path is absolute; neither it nor its real path (links
resolved) is a drive root, `/`, a system root (`/Users`, `/Users/Shared`, `/home`, `/root`,
`/var`, `/etc`, `/tmp`, `/usr`, `/opt`) or a home directory (the daemon's, and here also the
agent user's); it exists, is a directory, and can be listed and written (a hidden probe file
is made and removed). A mode this daemon does not know fails the task rather than running in
place: the mode is how a user asks for isolation. A squad leader's task only coordinates and
never binds to the folder. Every failure is a `LocalDirectoryError` whose sentence names what
the user can change.

With an agent user (a root daemon), the probe would only prove that root can write; the folder
must instead let that user list and write it, by its owner, group and mode bits. When it does
not, the task fails saying so: the daemon never changes a user's folder to make it fit.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from backends.process.identity import AgentUser
from daemon.boundary.beneath import create_at, opened_real
from daemon.errors import LocalDirectoryError
from daemon.protocol.models import Task

RESOURCE_TYPE = "local_directory"
IN_PLACE, WORKTREE = "in_place", "worktree"
PROTECTED_ROOTS = (
    "/",
    "/Users",
    "/Users/Shared",
    "/home",
    "/root",
    "/var",
    "/etc",
    "/tmp",
    "/usr",
    "/opt",
)
PROBE_PREFIX = ".multica-rwcheck-"
FAILURE_REASON = "local_directory_error"


@dataclass(frozen=True, slots=True)
class LocalDirectory:
    """The task's local directory: the path as configured (cleaned), its real path (the key
    tasks on one folder share), the resource's label and its execution mode."""

    path: Path
    real: Path
    label: str = ""
    mode: str = ""

    @property
    def worktree(self) -> bool:
        """Whether each task gets its own worktree instead of the folder itself."""
        return self.mode.strip() == WORKTREE

    @property
    def display_name(self) -> str:
        """What the server and its UI are told: the label, else the folder's name, never the
        path (it names the user's account, and the wait reason is shown to everyone)."""
        return self.label.strip() or self.path.name

    def check_mode(self) -> None:
        """Refuse a mode this daemon does not implement (never fall back to in place)."""
        if self.mode.strip() not in ("", IN_PLACE, WORKTREE):
            raise LocalDirectoryError(
                "local_directory: this daemon does not support execution_mode"
                f" {quoted(self.mode)} for {quoted(self.display_name)} (update the daemon, or set"
                f" the resource's execution mode to {quoted(IN_PLACE)} or {quoted(WORKTREE)});"
                " refusing to run in place, since that would modify a directory the resource"
                " asked to isolate"
            )


def find(task: Task, daemon_id: str) -> LocalDirectory | None:
    """The task's local directory on this machine, if its project has one for `daemon_id`.

    Another daemon's resource is skipped; a broken one of ours, or two of ours (the server
    allows one per project and daemon), fail the task rather than guess the folder."""
    if task.is_leader_task or not daemon_id:
        return None
    found: LocalDirectory | None = None
    for resource in task.project_resources:
        if resource.get("resource_type") != RESOURCE_TYPE:
            continue
        ref = _ref(resource.get("resource_ref"))
        owner = str(ref.get("daemon_id") or "").strip()
        if not owner:
            raise LocalDirectoryError("local_directory: resource_ref missing daemon_id")
        if owner != daemon_id:
            continue
        if found is not None:
            raise LocalDirectoryError(
                "local_directory: project has multiple local_directory resources for this"
                f" daemon ({quoted(found.display_name)} and"
                f" {quoted(_text(ref, 'label') or 'another')});"
                " remove the extra in project settings"
            )
        path = _absolute(_text(ref, "local_path"))
        found = LocalDirectory(path, _real(path), _text(ref, "label"), _text(ref, "execution_mode"))
    return found


def check_path(local: LocalDirectory, homes: Iterable[str], user: AgentUser | None) -> None:
    """Refuse a folder no agent may be pointed at, or one it could not list and write."""
    path = local.path
    homes = [os.path.normpath(h) for h in homes if h]
    if why := _protected(str(path), homes):
        raise LocalDirectoryError(f"local_directory: {why} ({quoted(path)})")
    try:
        info = path.stat()
    except FileNotFoundError:
        raise LocalDirectoryError(f"local_directory: path does not exist: {quoted(path)}") from None
    except OSError as exc:
        raise LocalDirectoryError(f"local_directory: stat {quoted(path)}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise LocalDirectoryError(f"local_directory: path is not a directory: {quoted(path)}")
    real = os.path.realpath(path)
    # Checked on the real path too: a link (or a parent that is one) must not route the
    # agent's writes into a root the literal path does not name.
    if why := _protected(real, homes, resolve=True):
        where = f"symlink target of {quoted(path)} is {quoted(real)}" if real != str(path) else real
        raise LocalDirectoryError(f"local_directory: {why} ({where})")
    if user is not None:
        _fits(local, info, user)
    else:
        _probe(path, Path(real))


def _fits(local: LocalDirectory, info: os.stat_result, user: AgentUser) -> None:
    """The agent user may list and write the folder, by its owner, group and mode bits."""
    mode = info.st_mode
    if info.st_uid == user.uid:
        ok = mode & stat.S_IRWXU == stat.S_IRWXU
    elif info.st_gid in user.groups or info.st_gid == user.gid:
        ok = mode & stat.S_IRWXG == stat.S_IRWXG
    else:
        ok = mode & stat.S_IRWXO == stat.S_IRWXO
    if not ok:
        raise LocalDirectoryError(
            f"local_directory: agents on this machine run as {quoted(user.name)}"
            f" (uid {user.uid}), which cannot write {quoted(local.display_name)}: it belongs to"
            f" uid {info.st_uid}, gid {info.st_gid}, mode {stat.S_IMODE(mode):04o}. Give the"
            " folder to that user (or its group write access), or point the project at a"
            " folder it owns; the daemon does not change the permissions of your files"
        )


def _probe(path: Path, real: Path) -> None:
    """List the folder and make (then remove) a hidden file in it, as the daemon's user."""
    name = PROBE_PREFIX + secrets.token_hex(8)
    try:
        with opened_real(real) as fd:
            os.listdir(fd)
            try:
                create_at(fd, name, b"", 0o600)
            except OSError as exc:
                raise LocalDirectoryError(
                    f"local_directory: write {quoted(path)}: {exc.strerror}"
                ) from None
            os.unlink(name, dir_fd=fd)
    except OSError as exc:
        raise LocalDirectoryError(f"local_directory: read {quoted(path)}: {exc.strerror}") from None


def _protected(path: str, homes: list[str], *, resolve: bool = False) -> str:
    """Why `path` is a root no agent may work in ("" when it is not one)."""
    for banned in PROTECTED_ROOTS:
        forms = {banned, os.path.realpath(banned)} if resolve else {banned}
        if path in forms:
            return f"path is a protected system root {quoted(banned)}"
    for home in homes:
        forms = {home, os.path.realpath(home)} if resolve else {home}
        if path in forms:
            return "path is the user's home directory"
    return ""


def _absolute(raw: str) -> Path:
    text = raw.strip()
    if not text:
        raise LocalDirectoryError("local_directory: local_path is empty")
    if not os.path.isabs(text) or "\0" in text:
        raise LocalDirectoryError(
            f"local_directory: local_path must be absolute, got {quoted(text)}"
        )
    return Path(os.path.normpath(text))


def _real(path: Path) -> Path:
    # A folder that cannot be resolved keys its lock by its own path: the checks say why.
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError:
        return path


def _ref(raw: object) -> dict[str, object]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise LocalDirectoryError("local_directory: parse resource_ref: not JSON") from None
    if not isinstance(raw, dict):
        raise LocalDirectoryError("local_directory: parse resource_ref: not an object")
    return raw


def _text(ref: dict[str, object], key: str) -> str:
    value = ref.get(key)
    return value if isinstance(value, str) else ""


def quoted(value: object) -> str:
    """A name or path in a sentence the user reads, in double quotes as Multica's daemon
    quotes them (its `%q`)."""
    return json.dumps(str(value), ensure_ascii=False)
