"""The daemon's state on disk: owner-only directories and files, atomic writes, safe names.

Whatever the umask, what the daemon creates is 0700 (directories) or 0600 (files): the state
holds prompts, transcripts and task tokens, readable by no other user of the machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def ensure_dir(path: Path) -> Path:
    """`path` as a directory; each one created here (parents too) is owner-only."""
    missing: list[Path] = []
    at = path
    while not at.is_dir():
        missing.append(at)
        if at.parent == at:
            break
        at = at.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue
        # mkdir's mode is filtered by the umask, which may also take the owner's bits.
        os.chmod(directory, DIR_MODE)
    return path


def write_atomic(path: Path, data: str, *, durable: bool = True) -> None:
    """Replace `path` with `data` (owner-only) so a reader sees the old or the new file whole.

    `durable` fsyncs the file and its directory, so the rename survives a power cut too. A
    write that fails (a full disk) removes its temporary file and raises.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as fh:
                fh.write(data)
                fh.flush()
                if durable:
                    os.fsync(fh.fileno())
        finally:
            os.close(fd)
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    if durable:
        sync_dir(path.parent)


def append_line(path: Path, line: str) -> None:
    """Append one line to `path`, creating it owner-only."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def create_private(path: Path) -> Path:
    """`path` as an existing owner-only file (for files another library opens, like SQLite's)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path


def sync_dir(directory: Path) -> None:
    """fsync `directory` so a rename in it survives a power cut; best effort."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def path_part(value: str) -> str:
    """`value` as one safe path component: itself when plain (a UUID), else a hashed name.

    Plain means letters, digits, `-` and `_`, at most 64 characters; anything else keeps a
    readable prefix and gains `.<sha256 prefix>`. No plain value contains a dot, so the two
    kinds never meet, and `a.b`, `a_b`, `../x` and a 300-character id all stay distinct and short.
    """
    if _PLAIN.fullmatch(value):
        return value
    readable = _UNSAFE.sub("_", value)[:40].strip("_-") or "_"
    return f"{readable}.{hashlib.sha256(value.encode()).hexdigest()[:16]}"
