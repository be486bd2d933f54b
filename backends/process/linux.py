"""The Linux-only process facts: becoming a child subreaper, this boot's id, keeping the
daemon's own /proc entries from its agents, and barring privilege gains on exec.

Elsewhere each answers "not available" (False, "", None), and the callers degrade: orphans go
to init instead of the daemon, a recorded start time is never trusted after a restart, and
the daemon's process stays as readable to its user as any other.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

IS_LINUX = sys.platform == "linux"
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_NO_NEW_PRIVS = 38
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def become_subreaper() -> bool:
    """Adopt orphaned descendants (PR_SET_CHILD_SUBREAPER) so they cannot escape to PID 1."""
    answer = _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if answer == -1:
        log.warning("could not become a child subreaper: errno %d", ctypes.get_errno())
    return answer == 0


def hide_from_agents() -> bool:
    """Make this process non-dumpable (PR_SET_DUMPABLE 0), so processes of the same user — its
    agents — can no longer open its `/proc/<pid>/environ`, `mem` or `maps`, nor attach to it.

    The kernel then makes the process's /proc entries root-owned; root still reads them. The
    flag is reset when a child execs, so the agents stay ordinary, inspectable processes.
    """
    answer = _prctl(_PR_SET_DUMPABLE, 0)
    if answer == -1:
        log.warning("could not hide the daemon's /proc entries: errno %d", ctypes.get_errno())
    return answer == 0


def dumpable() -> bool | None:
    """Whether this process is dumpable (its /proc entries open to its user); None elsewhere."""
    answer = _prctl(_PR_GET_DUMPABLE, 0)
    return None if answer is None or answer < 0 else bool(answer)


def forbid_privilege_gain() -> bool:
    """Set PR_SET_NO_NEW_PRIVS on this process: no exec by it or any descendant can gain
    privileges again (setuid and setgid bits, file capabilities). It is inherited by every
    child and cannot be cleared, so it covers agents however they start their tools.

    Set on the daemon itself because anyio offers no hook between fork and exec; the daemon
    gains nothing by exec (its only children are agents), and `setuid` itself is unaffected.
    """
    answer = _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if answer == -1:
        log.warning("could not set no_new_privs: errno %d", ctypes.get_errno())
    return answer == 0


def _prctl(option: int, value: int) -> int | None:
    """`prctl(option, value)`'s answer (-1 on failure, errno set); None where there is none."""
    if not IS_LINUX:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0))
    except (OSError, AttributeError):
        return None


def boot_id() -> str:
    """This boot's id (Linux), or "" where unknown; start times only compare within one boot."""
    if not IS_LINUX:
        return ""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""
