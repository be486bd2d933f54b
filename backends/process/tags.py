"""Finding processes by the tracking tag in their initial environment (`/proc/PID/environ`).

A process keeps the environment it was started with there, whatever it sets later; one that
cleared it (`env -i`) carries no tag, and is found by its parent links or the registry instead
(`tree`, `registry`). Nothing is found where there is no /proc.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from backends.process.tree import ProcIdentity, all_pids, identify


def tagged(tag_var: str, value: str) -> list[ProcIdentity]:
    """Live processes (other than this one) whose initial environment has `tag_var=value`."""
    if not value:
        return []
    found: list[ProcIdentity] = []
    for pid, environ in environs():
        if value in tag_values(environ, tag_var):
            identity = identify(pid)
            if identity is not None:
                found.append(identity)
    return found


def tag_values(environ: bytes, tag_var: str) -> set[str]:
    """The values `tag_var` has in one process's initial environment (`environs`): none, or
    usually one."""
    prefix = f"{tag_var}=".encode()
    if prefix not in environ:  # nearly every process: no split
        return set()
    return {
        entry[len(prefix) :].decode(errors="replace")
        for entry in environ.split(b"\0")
        if entry.startswith(prefix)
    }


def environs() -> Iterator[tuple[int, bytes]]:
    """Every other process's initial environment that this one may read, with its pid."""
    me = os.getpid()
    for pid in all_pids():
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                environ = file.read()
        except OSError:  # another user's process, or it just exited
            continue
        yield pid, environ
