"""The one way the daemon touches a place an agent can write: through directory handles.

A root daemon with an agent user works in folders that user owns (a task's directory, its
work dir, its `~/.codex`). Anything there may be a link the agent planted, a FIFO, a device,
or a folder it swaps for a link at the moment the daemon reaches it: a step that names such a
place by path, and lets the kernel resolve that path again, can be sent anywhere root can go.

So privilege separation here is a shape, as in OpenSSH's privsep and systemd's use of
`openat2(RESOLVE_BENEATH)`, not a set of checks: the daemon opens an anchor it trusts (a
directory whose path no agent can change: the workspaces root, a workspace's 0711 folder, a
task's own folder in it), and from there walks down one component at a time with `openat`
(`O_NOFOLLOW`, `O_DIRECTORY`), reading, writing, listing, linking and removing only relative
to the handles it opened itself. Nothing is re-resolved from a path string, a link is never
followed (it is removed as itself), a file is read only when it is regular, never blocking and
never past a cap, and a walk never crosses onto another file system (a mount point an agent
could not make, but a misconfigured volume could hold). Where an act is naturally the agent's
own, it is handed to the agent's identity instead (`remove_as`). Every other module asks here;
a lint test (tests/daemon/boundary/test_boundary_lint.py) keeps it so.

Removal and sizing are iterative, with an explicit stack and only the deepest `MAX_OPEN`
handles held: a folder chain thousands deep neither hits the interpreter's recursion limit nor
the process's file limit. Climbing back past a handle that was let go reopens `..` and checks
it is the same directory (device and inode) it left, so a folder moved mid-walk stops the walk.

The module is longer than most, on purpose: the boundary is audited in one place, and the
single steps and the walks share the same handle discipline.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from daemon.boundary.untrusted import read_regular

if TYPE_CHECKING:
    from backends.process.identity import AgentUser

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_READ_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_OPEN = 32
"""Directory handles one walk holds at most (the deepest ones of its chain)."""
REMOVE_TIMEOUT = 600.0
"""Seconds a removal handed to the agent's identity may take."""

Owner = tuple[int, int]
"""(uid, gid) of the user a file is handed to; None where the daemon's user keeps it."""


class UnsafePathError(ValueError):
    """A relative path that is absolute, empty or climbs out of its root."""


def relative_parts(path: str | Sequence[str]) -> tuple[str, ...]:
    """The components of a root-relative `path`; refuses absolute paths and `..`."""
    text = path if isinstance(path, str) else "/".join(path)
    pure = PurePosixPath(text.replace("\\", "/"))
    parts = tuple(p for p in pure.parts if p not in ("", "."))
    if pure.is_absolute() or not parts or ".." in parts or "\0" in text:
        raise UnsafePathError(f"unsafe relative path: {text!r}")
    return parts


def _give(fd: int, owner: Owner | None) -> None:
    """Hand the open file or directory to `owner` (if it is not theirs already)."""
    if owner is not None and os.fstat(fd).st_uid != owner[0]:
        os.fchown(fd, *owner)


@contextmanager
def opened_dir(
    anchor: Path,
    path: str | Sequence[str] = (),
    *,
    create: bool = False,
    mode: int = 0o700,
    owner: Owner | None = None,
    follow: bool = False,
    mounts: bool = False,
) -> Iterator[int]:
    """A handle of `anchor/path`, walked down from `anchor` one component at a time.

    `anchor` itself is opened by path (its own last component never a link, unless `follow`
    says no agent could have made it one): the caller vouches that no agent can change what
    its path names. Below it no link is followed and no other file system entered — unless
    `mounts` says every component is the daemon's own, where an operator may have mounted a
    volume (a workspace's folder). With `create`, missing components are made (`mode` whatever
    the umask, `owner`'s when given).
    """
    parts = relative_parts(path) if path else ()
    fd = os.open(anchor, _DIR & ~os.O_NOFOLLOW if follow else _DIR)
    try:
        device = os.fstat(fd).st_dev
        for depth, part in enumerate(parts, 1):
            made = False
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, mode, dir_fd=fd)
                    made = True
            try:
                child = os.open(part, _DIR, dir_fd=fd)
            except NotADirectoryError:
                # A link or a file holds the name (left as it is): say which, with its path.
                where = str(anchor.joinpath(*parts[:depth]))
                found = stat_at(fd, part)
                if found is not None and stat.S_ISLNK(found.st_mode):
                    raise OSError(errno.ELOOP, "a symbolic link", where) from None
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), where) from None
            os.close(fd)
            fd = child
            if not mounts and os.fstat(fd).st_dev != device:
                raise OSError(errno.EXDEV, "another file system", str(anchor.joinpath(*parts)))
            if made:
                os.fchmod(fd, mode)
            if create:
                _give(fd, owner)
        yield fd
    finally:
        os.close(fd)


@contextmanager
def opened_at(dir_fd: int, name: str) -> Iterator[int]:
    """A handle of the directory `name` in the open directory (never through a link)."""
    fd = os.open(name, _DIR, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def ensure_dir_under(
    anchor: Path, path: str, mode: int = 0o700, owner: Owner | None = None, mounts: bool = False
) -> Path:
    """`anchor/path` as a directory, without following any link below `anchor`; return it
    (`mounts`: as `opened_dir`'s)."""
    parts = relative_parts(path)
    with opened_dir(anchor, parts, create=True, mode=mode, owner=owner, mounts=mounts):
        pass
    return anchor.joinpath(*parts)


def fresh_dir_under(anchor: Path, prefix: str, owner: Owner | None = None) -> Path:
    """A new private (0700) directory `anchor/<prefix><random>`, `owner`'s when given."""
    with opened_dir(anchor) as dir_fd:
        while True:
            name = prefix + secrets.token_hex(6)
            try:
                os.mkdir(name, 0o700, dir_fd=dir_fd)
            except FileExistsError:
                continue
            with opened_at(dir_fd, name) as fd:
                os.fchmod(fd, 0o700)  # the umask may have taken the owner's bits
                _give(fd, owner)
            return anchor / name


def write_at(
    dir_fd: int, name: str, data: bytes, mode: int = 0o600, owner: Owner | None = None
) -> None:
    """Write `data` as `name` in the open directory: a fresh temporary file renamed over it,
    which replaces a link rather than writing through it."""
    temp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, _NEW_FILE, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as out:
            # Through the descriptor, and before the file is given away: a path could be
            # swapped meanwhile, and changing the mode of another's file takes CAP_FOWNER.
            os.fchmod(out.fileno(), mode)
            _give(out.fileno(), owner)
            out.write(data)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


def write_under(
    anchor: Path, path: str, data: str | bytes, mode: int = 0o600, owner: Owner | None = None
) -> Path:
    """Write `data` to `anchor/path` without following any link below `anchor`; the path.

    Raises `UnsafePathError` for a path that would leave `anchor`, `OSError` (ELOOP) when a
    directory on the way is a symlink and `FileExistsError` when it is a file. With `owner`,
    the file and every directory on the way are that user's.
    """
    *dirs, name = relative_parts(path)
    raw = data.encode() if isinstance(data, str) else data
    with opened_dir(anchor, dirs, create=True, owner=owner) as dir_fd:
        write_at(dir_fd, name, raw, mode, owner)
    return anchor.joinpath(*dirs, name)


def read_at(
    dir_fd: int,
    name: str,
    limit: int,
    readable_by: Owner | None = None,
    *,
    tail: bool = False,
    follow: bool = False,
) -> bytes:
    """The bytes of the regular file `name` in the open directory, at most `limit`, never
    through a link and never blocking (a FIFO, a device: OSError).

    With `readable_by`, only a file that user could read itself (by its owner, group and
    mode bits, checked on the very file opened): a hard link to a root-only file, which the
    agent could plant but not read, is refused (EACCES) rather than copied to it. With `tail`,
    a larger file gives its last `limit` bytes. `follow` lets `name` itself be a link, where
    no one but the daemon's own user could have made it (the operator's home).
    """
    check = _readable(readable_by)
    return read_regular(name, limit, follow=follow, dir_fd=dir_fd, check=check, tail=tail)


def _readable(who: Owner | None) -> Callable[[os.stat_result], bool] | None:
    if who is None:
        return None
    uid, gid = who

    def check(info: os.stat_result) -> bool:
        if info.st_uid == uid:
            return bool(info.st_mode & stat.S_IRUSR)
        if info.st_gid == gid:
            return bool(info.st_mode & stat.S_IRGRP)
        return bool(info.st_mode & stat.S_IROTH)

    return check


def may_enter(info: os.stat_result, who: Owner) -> bool:
    """Whether `who` could list and enter the directory `info` describes itself (by its owner,
    group and mode bits): root walks into no folder of an agent's tree the agent could not."""
    uid, gid = who
    if info.st_uid == uid:
        bits = stat.S_IRUSR | stat.S_IXUSR
    elif info.st_gid == gid:
        bits = stat.S_IRGRP | stat.S_IXGRP
    else:
        bits = stat.S_IROTH | stat.S_IXOTH
    return info.st_mode & bits == bits


def read_under(anchor: Path, path: str, limit: int = 1 << 20) -> str | None:
    """The text of `anchor/path` when it is a regular file of at most `limit` bytes reached
    without links, else None."""
    try:
        *dirs, name = relative_parts(path)
        with opened_dir(anchor, dirs) as dir_fd:
            data = read_at(dir_fd, name, limit)
        return data.decode("utf-8", "replace")
    except (OSError, UnsafePathError):
        return None


@contextmanager
def opened_real(path: Path) -> Iterator[int]:
    """A handle of the directory at `path`, a real path (no link in it), walked down from `/`
    one component at a time: a link that appeared on the way since is refused (ELOOP), not
    followed. For a folder outside the daemon's trees (a user's project), on any mount."""
    with opened_dir(Path("/"), Path(path).parts[1:], mounts=True) as fd:
        yield fd


@contextmanager
def made_dirs_at(
    dir_fd: int,
    parts: Sequence[str],
    made: list[tuple[str, ...]],
    mode: int = 0o755,
    owner: Owner | None = None,
) -> Iterator[int]:
    """A handle of `parts` below the open directory, each missing component made (`mode`,
    `owner`'s) and appended to `made` as its path; no link followed."""
    fd = os.dup(dir_fd)
    try:
        for depth, part in enumerate(parts, 1):
            created = False
            with suppress(FileExistsError):
                os.mkdir(part, mode, dir_fd=fd)
                created = True
                made.append(tuple(parts[:depth]))
            child = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
            if created:
                os.fchmod(fd, mode)
                _give(fd, owner)
        yield fd
    finally:
        os.close(fd)


def create_at(
    dir_fd: int, name: str, data: bytes, mode: int = 0o644, owner: Owner | None = None
) -> None:
    """`name` made in the open directory with `data`; FileExistsError when anything (a file,
    a link, a folder) already holds the name, which is left as it is."""
    fd = os.open(name, _NEW_FILE, mode, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as out:
        os.fchmod(out.fileno(), mode)
        _give(out.fileno(), owner)
        out.write(data)


def copy_at(
    src_dir: int, name: str, dst_dir: int, limit: int, mode: int, owner: Owner | None = None
) -> int:
    """Copy the regular file `name` of one open directory as a new file of the same name in
    another (`mode`, `owner`'s), streamed, never through a link, never blocking on a FIFO; its
    size. OSError (EFBIG) past `limit` bytes, the partial copy removed."""
    src = os.open(name, _READ_FILE, dir_fd=src_dir)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
        os.set_blocking(src, True)
        dst = os.open(name, _NEW_FILE, mode, dir_fd=dst_dir)
        copied = 0
        try:
            with os.fdopen(dst, "wb") as out:
                os.fchmod(out.fileno(), mode)
                _give(out.fileno(), owner)
                while chunk := os.read(src, 1 << 20):
                    copied += len(chunk)
                    if copied > limit:
                        raise OSError(errno.EFBIG, f"larger than {limit} bytes", name)
                    out.write(chunk)
        except BaseException:
            with suppress(OSError):
                os.unlink(name, dir_fd=dst_dir)
            raise
        return copied
    finally:
        os.close(src)


def rewrite_at(dir_fd: int, name: str, data: bytes) -> None:
    """The regular file `name` in the open directory rewritten in place with `data` (its
    inode, owner and mode kept), never through a link, never a FIFO or device."""
    fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as out:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", name)
        out.truncate(0)
        out.write(data)


def unlink_at(dir_fd: int, parts: Sequence[str]) -> None:
    """Remove the file or link `parts` below the open directory (never a folder, never a
    link's target); missing is done."""
    *dirs, name = parts
    try:
        with opened_dir_at(dir_fd, dirs) as fd:
            info = stat_at(fd, name)
            if info is not None and not stat.S_ISDIR(info.st_mode):
                os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        return


def rmdir_at(dir_fd: int, parts: Sequence[str]) -> bool:
    """Remove the empty folder `parts` below the open directory; False when it is not empty
    (someone put something in it), True when it is gone."""
    *dirs, name = parts
    try:
        with opened_dir_at(dir_fd, dirs) as fd:
            os.rmdir(name, dir_fd=fd)
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return False
        raise
    return True


@contextmanager
def opened_dir_at(dir_fd: int, parts: Sequence[str]) -> Iterator[int]:
    """A handle of `parts` below the open directory, walked without following a link."""
    fd = os.dup(dir_fd)
    try:
        for part in parts:
            child = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def stat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """`name` in the open directory as itself (a link is a link), None when missing."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def entries_at(dir_fd: int) -> list[tuple[str, os.stat_result]]:
    """The open directory's entries, sorted by name, each as itself (links not followed)."""
    found = []
    for name in sorted(os.listdir(dir_fd)):
        info = stat_at(dir_fd, name)
        if info is not None:
            found.append((name, info))
    return found


def link_at(dir_fd: int, name: str, target: Path, owner: Owner | None = None) -> None:
    """`name` in the open directory as a link to `target`, whatever stood there removed."""
    remove_at(dir_fd, name)
    os.symlink(target, name, dir_fd=dir_fd)
    if owner is not None:
        os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)


class _Chain:
    """The directories from a walk's start down to where it is: each one's device and inode,
    and handles for only the deepest `MAX_OPEN`."""

    def __init__(self, top: int) -> None:
        info = os.fstat(top)
        self.device = info.st_dev
        self._frames: list[list[int]] = [[os.dup(top), info.st_dev, info.st_ino]]

    @property
    def fd(self) -> int:
        return self._frames[-1][0]

    def down(self, name: str, expected: os.stat_result) -> None:
        child = os.open(name, _DIR, dir_fd=self.fd)
        info = os.fstat(child)
        if (info.st_dev, info.st_ino) != (expected.st_dev, expected.st_ino):
            os.close(child)  # swapped between the look and the open
            raise OSError(errno.ESTALE, "changed during the walk", name)
        self._frames.append([child, info.st_dev, info.st_ino])
        if len(self._frames) > MAX_OPEN:
            frame = self._frames[-MAX_OPEN - 1]
            os.close(frame[0])
            frame[0] = -1

    def up(self) -> None:
        fd = self._frames.pop()[0]
        parent = self._frames[-1]
        if parent[0] >= 0:
            os.close(fd)
            return
        try:
            again = os.open("..", _DIR, dir_fd=fd)
        finally:
            os.close(fd)
        info = os.fstat(again)
        if (info.st_dev, info.st_ino) != (parent[1], parent[2]):
            os.close(again)
            raise OSError(errno.ESTALE, "a folder was moved during the walk")
        parent[0] = again

    def close(self) -> None:
        for frame in self._frames:
            if frame[0] >= 0:
                os.close(frame[0])
        self._frames.clear()


Enter = Callable[[int, str, os.stat_result], bool]
Visit = Callable[[int, str, os.stat_result], None]
Leave = Callable[[int, str], None]


def walk_at(top: int, enter: Enter, visit: Visit, leave: Leave | None = None) -> list[OSError]:
    """Depth first below the open directory `top`, links never followed; the errors met.

    `enter(parent, name, info)` says whether to go into a directory (one on another file
    system is never entered: EXDEV), `visit` gets everything else, `leave(parent, name)` a
    directory whose entries were all seen. Each is called with its parent's open handle.
    """
    errors: list[OSError] = []
    chain = _Chain(top)
    try:
        pending = [_names(chain.fd, errors)]
        inside: list[str] = []
        while pending:
            if not pending[-1]:
                pending.pop()
                if inside:
                    chain.up()
                    name = inside.pop()
                    if leave is not None:
                        _call(errors, leave, chain.fd, name)
                continue
            name = pending[-1].pop()
            info = stat_at(chain.fd, name)
            if info is None:
                continue
            if not stat.S_ISDIR(info.st_mode):
                _call(errors, visit, chain.fd, name, info)
            elif info.st_dev != chain.device:
                errors.append(OSError(errno.EXDEV, "another file system", name))
            elif enter(chain.fd, name, info):
                try:
                    chain.down(name, info)
                except OSError as exc:
                    errors.append(exc)
                    continue
                pending.append(_names(chain.fd, errors))
                inside.append(name)
    except OSError as exc:  # a folder moved under the walk: it stops here
        errors.append(exc)
    finally:
        chain.close()
    return errors


def _names(fd: int, errors: list[OSError]) -> list[str]:
    try:
        return sorted(os.listdir(fd), reverse=True)
    except OSError as exc:
        errors.append(exc)
        return []


def _call(errors: list[OSError], step: Callable[..., None], *args: object) -> None:
    try:
        step(*args)
    except FileNotFoundError:
        pass
    except OSError as exc:
        errors.append(exc)


def remove_at(dir_fd: int, name: str) -> None:
    """Remove `name` from the open directory: a file or a link (never its target) as itself,
    a directory with all below it; missing is done. Raises the first error met, after
    removing all it could."""
    info = stat_at(dir_fd, name)
    if info is None:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    if info.st_dev != os.fstat(dir_fd).st_dev:
        raise OSError(errno.EXDEV, "another file system", name)
    child = os.open(name, _DIR, dir_fd=dir_fd)
    try:
        if os.fstat(child).st_ino != info.st_ino:
            raise OSError(errno.ESTALE, "changed during the removal", name)

        def unlink(parent: int, entry: str, _: os.stat_result) -> None:
            os.unlink(entry, dir_fd=parent)

        def rmdir(parent: int, entry: str) -> None:
            os.rmdir(entry, dir_fd=parent)

        errors = walk_at(child, lambda *_: True, unlink, rmdir)
    finally:
        os.close(child)
    if errors:
        raise errors[0]
    os.rmdir(name, dir_fd=dir_fd)


def remove_under(anchor: Path, path: str) -> None:
    """Remove `anchor/path` (a tree, a file or a link) reached without links; missing is done."""
    *dirs, name = relative_parts(path)
    try:
        with opened_dir(anchor, dirs) as dir_fd:
            remove_at(dir_fd, name)
    except FileNotFoundError:
        return


def size_at(dir_fd: int, name: str | None = None) -> int:
    """Bytes of the regular files in the open directory (or its `name`), links not counted."""
    total = 0

    def count(parent: int, entry: str, info: os.stat_result) -> None:
        nonlocal total
        if stat.S_ISREG(info.st_mode):
            total += info.st_size

    if name is None:
        walk_at(dir_fd, lambda *_: True, count)
        return total
    info = stat_at(dir_fd, name)
    if info is None or not stat.S_ISDIR(info.st_mode):
        return info.st_size if info is not None and stat.S_ISREG(info.st_mode) else 0
    try:
        with opened_at(dir_fd, name) as fd:
            walk_at(fd, lambda *_: True, count)
    except OSError:
        pass
    return total


def remove_as(user: AgentUser, path: Path) -> bool:
    """Remove `path` as `user` (`rm -rf --one-file-system`), for a tree that user made: what
    it may not remove stays, whatever a link on the way points at. True when all went."""
    rm = shutil.which("rm", path="/usr/bin:/bin") or "rm"
    try:
        done = subprocess.run(
            [rm, "-rf", "--one-file-system", "--", str(path)],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=REMOVE_TIMEOUT,
            start_new_session=True,
            **user.spawn_options(),
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def run_as(
    user: AgentUser,
    argv: Sequence[str],
    stdin: bytes,
    env: Mapping[str, str],
    timeout: float,
    limit: int,
) -> bytes | None:
    """Run `argv` as `user` (in `/`, its own session) and return its stdout, for a read of
    what that user owns: it sees only what the user may see, whatever a link on the way points
    at. None when it fails, outlives `timeout` or prints more than `limit` bytes."""
    try:
        done = subprocess.run(
            list(argv),
            cwd="/",
            env=dict(env),
            input=stdin,
            capture_output=True,
            timeout=timeout,
            start_new_session=True,
            **user.spawn_options(),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out: bytes = done.stdout
    if done.returncode != 0 or len(out) > limit:
        return None
    return out
