"""The state directory's start-up check: usable by the daemon, or one clear fatal line."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from daemon.errors import DaemonError


def require_writable(state_dir: Path) -> None:
    """Create `state_dir` if missing and prove a file can be written in it; else DaemonError.

    Found at start-up, a read-only or misplaced state directory is one line naming it; found
    later, by the outbox or the agent records, it would be a task's lost report.
    """
    try:
        # Owner-only when made here: it will hold prompts, transcripts and task tokens.
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=state_dir, prefix=".write-check-")
        os.close(fd)
        os.unlink(probe)
    except FileExistsError:
        reason = "it is not a directory"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    else:
        return
    raise DaemonError(f"cannot use the state directory {state_dir}: {reason}")
