"""The single-instance lock: one daemon per state directory, held with `flock` for its life."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from daemon.errors import AlreadyRunningError, DaemonError
from daemon.files.private import FILE_MODE, ensure_dir

LOCK_FILE = "daemon.lock"


@contextlib.contextmanager
def state_dir_lock(state_dir: Path) -> Iterator[None]:
    """Hold `<state_dir>/daemon.lock` (it holds our pid) while inside; another holder is fatal.

    Two daemons on one state directory would share a daemon id and "recover", that is kill,
    each other's agents. The kernel drops the lock when the process dies, however it dies,
    so a stale file never blocks a restart. A refused daemon changes nothing on disk.
    """
    lock = state_dir / LOCK_FILE
    try:
        ensure_dir(state_dir)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        # One line an operator acts on: what is wrong with the directory, not an errno dump.
        reason = (
            "it is not a directory"
            if isinstance(exc, FileExistsError)
            else exc.strerror or str(exc)
        )
        raise DaemonError(f"cannot use the state directory {state_dir}: {reason}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise AlreadyRunningError(
                f"another daemon (pid {holder}) is already running on the state directory "
                f"{state_dir}; stop it, or set MULTICA_DAEMON_STATE_DIR to another directory"
            ) from None
        os.fchmod(fd, FILE_MODE)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
