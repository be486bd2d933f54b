"""The `agent-daemon` command's entry point: the command's modules imported with the garbage
collector paused, then frozen out of its sight."""

from __future__ import annotations

import gc


def main() -> int:
    """Import the command and run it; returns the process exit code."""
    # Importing the daemon leaves some 46,000 objects the collector tracks, nearly all of them
    # living as long as the daemon (its modules, classes and their validators): collections
    # while they pile up find next to nothing to free, and every later full collection walks
    # them again. Frozen once imported (as the daemon freezes everything alive once it is up,
    # daemon/collector.py), they are never walked: 35 ms less CPU before the first register
    # (tests/benchmarks/bench_startup.py). Pausing alone cost 35 ms more: the first
    # collections after it walked them all at once, and then again as the oldest generation.
    collecting = gc.isenabled()
    gc.disable()
    try:
        from daemon.cli.main import main as command
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    return command()
