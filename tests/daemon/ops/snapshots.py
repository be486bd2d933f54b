"""What the health port's tests feed it: a clock they move, a daemon with no task running."""

from __future__ import annotations

from daemon.snapshot import DaemonSnapshot


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def idle_snapshot(slots: int = 1) -> DaemonSnapshot:
    """A running daemon with no task, `slots` tasks at most."""
    return DaemonSnapshot(
        status="running",
        daemon_id="d1",
        device_name="box",
        server_url="http://127.0.0.1:1",
        registered=True,
        max_concurrent_tasks=slots,
        agents=(),
        workspaces=(),
        profile="",
        server_circuit="closed",
        outbox_depth=0,
        runs=(),
    )
