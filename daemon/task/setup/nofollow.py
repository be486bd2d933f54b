"""Files the daemon writes where an agent can reach: never through a link, never outside a root.

An agent owns its work directory (as the daemon's user, or as the agent user) and may leave
symlinks behind in it (a `CLAUDE.md` pointing at `~/.bashrc`, a `.claude` pointing at `/`);
the next run writing there must not follow them. Every directory on the way is opened
relative to its parent with `O_NOFOLLOW`, and each file is written to a fresh temporary name
and renamed over the target, which replaces a link rather than writing through it. Handed to
an agent user (`owner`), each is given away through its open descriptor, never by path: a
path the agent swapped meanwhile cannot make root chown something else.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath

from daemon.files.untrusted import read_regular

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

Owner = tuple[int, int]
"""(uid, gid) of the user a file is handed to; None where the daemon's user keeps it."""


class UnsafePathError(ValueError):
    """A relative path that is absolute, empty or climbs out of its root."""


def relative_parts(path: str) -> tuple[str, ...]:
    """The components of a root-relative `path`; refuses absolute paths and `..`."""
    pure = PurePosixPath(path.replace("\\", "/"))
    parts = tuple(p for p in pure.parts if p not in ("", "."))
    if pure.is_absolute() or not parts or ".." in parts or "\0" in path:
        raise UnsafePathError(f"unsafe relative path: {path!r}")
    return parts


@contextmanager
def _open_dir(
    root: Path, parts: Sequence[str], mode: int, owner: Owner | None = None
) -> Iterator[int]:
    """A descriptor of `root/parts...`, each component created if missing (with `mode`,
    whatever the umask), none a link; with `owner`, each component is that user's."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for depth, part in enumerate(parts, 1):
            created = True
            try:
                os.mkdir(part, mode, dir_fd=fd)
            except FileExistsError:
                created = False
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except NotADirectoryError:
                # A file holds the name (a link is ELOOP, left as it is): say so with its path.
                where = str(root.joinpath(*parts[:depth]))
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), where) from None
            os.close(fd)
            fd = child
            if created:
                os.fchmod(fd, mode)
            _give(fd, owner)
        yield fd
    finally:
        os.close(fd)


def _give(fd: int, owner: Owner | None) -> None:
    """Hand the open file or directory to `owner` (if it is not theirs already)."""
    if owner is not None and os.fstat(fd).st_uid != owner[0]:
        os.fchown(fd, *owner)


def ensure_dir_under(root: Path, path: str, mode: int = 0o700, owner: Owner | None = None) -> Path:
    """`root/path` as a directory, without following any link below `root`; return it."""
    parts = relative_parts(path)
    with _open_dir(root, parts, mode, owner):
        pass
    return root.joinpath(*parts)


def write_under(
    root: Path, path: str, data: str | bytes, mode: int = 0o600, owner: Owner | None = None
) -> Path:
    """Write `data` to `root/path` without following any link below `root`; return the path.

    Raises `UnsafePathError` for a path that would leave `root`, `OSError` (ELOOP) when a
    directory on the way is a symlink and `FileExistsError` when it is a file. With `owner`,
    the file and every directory on the way are that user's.
    """
    *dirs, name = relative_parts(path)
    raw = data.encode() if isinstance(data, str) else data
    with _open_dir(root, dirs, 0o700, owner) as dir_fd:
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(temp, _NEW_FILE, mode, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as out:
                # Through the descriptor, and before the file is given away: a path could be
                # swapped meanwhile, and changing the mode of another's file takes CAP_FOWNER.
                os.fchmod(out.fileno(), mode)
                _give(out.fileno(), owner)
                out.write(raw)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise
    return root.joinpath(*dirs, name)


def read_under(root: Path, path: str, limit: int = 1 << 20) -> str | None:
    """The text of `root/path` when it is a regular file of at most `limit` bytes reached
    without links, else None."""
    try:
        *dirs, name = relative_parts(path)
        fd = os.open(root, _DIR_FLAGS)
        try:
            for part in dirs:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
            # Not a FIFO or device (it would block the read or never end), not past `limit`.
            data = read_regular(name, limit, follow=False, dir_fd=fd)
        finally:
            os.close(fd)
        return data.decode("utf-8", "replace")
    except (OSError, UnsafePathError):
        return None
