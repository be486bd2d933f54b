"""Reading a file another process could have planted: only a regular file, never blocking,
never more than a cap.

A FIFO opened for reading blocks until a writer comes, and a device such as `/dev/zero` never
ends: a marker in a prior work directory, `~/.multica/daemon.id` or `config.json` made into one
would hang the thread reading it (holding a task's slot, or start-up) or fill memory. Here the
file is opened with `O_NONBLOCK` (a FIFO opens at once), checked with `fstat` to be a regular
file before a byte is read, and read to at most `limit` bytes; `follow=False` adds
`O_NOFOLLOW` for places where a link itself is the attack (a directory an agent writes).
Every refusal is an `OSError` saying why, like the failures callers already handle.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def read_regular(
    path: Path | str,
    limit: int,
    *,
    follow: bool = True,
    dir_fd: int | None = None,
    check: Callable[[os.stat_result], bool] | None = None,
    tail: bool = False,
) -> bytes:
    """The bytes of the regular file `path` (relative to `dir_fd` if given), at most `limit`.

    Raises `FileNotFoundError` when it is missing, and `OSError` when it is not a regular file
    (EINVAL), is larger than `limit` (EFBIG), is a link while `follow` is False (ELOOP), or
    fails `check` on the file opened (EACCES). With `tail`, a larger file gives its last `limit`
    bytes instead.
    """
    flags = _READ if follow else _READ | os.O_NOFOLLOW
    fd = os.open(path, flags, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if check is not None and not check(info):
            raise OSError(errno.EACCES, "not readable by its user", str(path))
        if info.st_size > limit:
            if not tail:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
            os.lseek(fd, info.st_size - limit, os.SEEK_SET)
        chunks: list[bytes] = []
        left = limit + 1  # one byte more says the file grew past the cap
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if tail and len(data) > limit:
            return data[-limit:]
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        return data
    finally:
        os.close(fd)
