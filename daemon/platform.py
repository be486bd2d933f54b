"""Linux-only process settings of the daemon itself: its /proc entries kept from its agents."""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4


def hide_from_agents() -> bool:
    """Make this process non-dumpable, so that processes of the same user — its own agents —
    can no longer open `/proc/<pid>/environ`, `mem`, `maps` or attach to it; False where the
    platform cannot (the daemon then runs as before, with a warning).

    The kernel makes a non-dumpable process's /proc entries root-owned: root (with
    CAP_SYS_PTRACE) still reads them. The flag is not inherited across exec, so the agents
    themselves stay ordinary, inspectable processes.
    """
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        ok = False
    if not ok:
        log.warning("could not hide the daemon's /proc entries from its agents (PR_SET_DUMPABLE)")
    return ok


def dumpable() -> bool | None:
    """Whether this process is dumpable (its /proc entries readable by its user); None where
    the platform cannot say."""
    if sys.platform != "linux":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0))
    except (OSError, AttributeError):
        return None
