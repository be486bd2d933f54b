"""The Python a local-skills read runs on as the agent user: root's to change, the user's to run.

The daemon's own interpreter (the file itself, not a virtual environment's link to it, which
may sit in a folder the agent user cannot enter), else the system's `python3`. Each is taken
only when no one but root or the daemon's user can change it (`backends.cli_trust`: root
never runs, nor hands to a child it starts, a file an agent could have written) and the agent
user may execute it: every folder on the way searchable, the file executable, by its owner,
group or other bits. The package it runs needs Python 3.9 (3.11 to read Codex's TOML).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys

from backends.cli_trust import refusal
from backends.process.identity import AgentUser

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def interpreter_for(user: AgentUser) -> str | None:
    """The interpreter to run as `user`, or None when neither candidate will do."""
    for found in (sys.executable, shutil.which("python3", path=SYSTEM_PATH)):
        if not found:
            continue
        real = os.path.realpath(found)
        if refusal(real, SYSTEM_PATH) is None and _runnable_by(real, user):
            return real
    return None


def _runnable_by(path: str, user: AgentUser) -> bool:
    """Whether `user` may execute `path` (the kernel's owner, group, other order)."""
    place = path
    while True:
        try:
            info = os.stat(place)
        except OSError:
            return False
        if info.st_uid == user.uid:
            bit = stat.S_IXUSR
        elif info.st_gid in (user.gid, *user.groups):
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return False
        if place == "/":
            return True
        place = os.path.dirname(place)
