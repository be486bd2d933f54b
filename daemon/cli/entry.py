"""The `agent-daemon` command's entry point: the command's modules imported with the garbage
collector paused."""

from __future__ import annotations

import gc


def main() -> int:
    """Import the command and run it; returns the process exit code."""
    # Importing the daemon leaves some 46,000 objects the collector tracks, nearly all of them
    # living as long as the daemon (its modules, classes and their validators): collections
    # while they pile up find next to nothing to free, and cost start-up 20-30 ms of CPU. The
    # collector runs again from the command's first line on, and the daemon freezes all of
    # them once it is up (daemon/collector.py).
    collecting = gc.isenabled()
    gc.disable()
    try:
        from daemon.cli.main import main as command
    finally:
        if collecting:
            gc.enable()
    return command()
