"""The Linux-only process facts: becoming a child subreaper, and this boot's id.

Elsewhere both answer "not available" (False, ""), and the callers degrade: orphans go to
init instead of the daemon, and a recorded start time is never trusted after a restart.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

IS_LINUX = sys.platform == "linux"
_PR_SET_CHILD_SUBREAPER = 36
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def become_subreaper() -> bool:
    """Adopt orphaned descendants (PR_SET_CHILD_SUBREAPER) so they cannot escape to PID 1."""
    if not IS_LINUX:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
    if not ok:
        log.warning("could not become a child subreaper: errno %d", ctypes.get_errno())
    return ok


def boot_id() -> str:
    """This boot's id (Linux), or "" where unknown; start times only compare within one boot."""
    if not IS_LINUX:
        return ""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""
