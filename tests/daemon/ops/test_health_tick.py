"""The health loop's tick: liveness every tick, the document only when it is read or due."""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path

from daemon.ops.health import HealthServer
from daemon.ops.metrics import Metrics
from daemon.ops.sdnotify import Notifier
from daemon.snapshot import DaemonSnapshot
from tests.daemon.ops.snapshots import Clock, idle_snapshot

LOCAL = {"host": "127.0.0.1"}


class Daemon:
    """Snapshots of an idle daemon whose slot count the test sets; counts the snapshots."""

    def __init__(self) -> None:
        self.slots = 0
        self.taken = 0

    def snapshot(self) -> DaemonSnapshot:
        self.taken += 1
        return idle_snapshot(self.slots)


def attached(clock: Clock, daemon: Daemon) -> HealthServer:
    """A port (not listening) ticking each 0.5 s, attached to `daemon` at `clock`'s now."""
    server = HealthServer("127.0.0.1:0", Metrics(), clock=clock, tick=0.5)
    server.attach(daemon.snapshot, lambda: None, lag=lambda: 0.0)
    return server


def shown_slots(server: HealthServer) -> int:
    reply = server.route("GET", "/health", "127.0.0.1", LOCAL)
    return int(json.loads(reply.body)["max_concurrent_tasks"])


def test_a_port_nobody_reads_builds_the_document_once_per_refresh() -> None:
    """Ticks every 0.5 s for 1.5 s build nothing after the attach; at 2 s one is built."""
    clock, daemon = Clock(), Daemon()
    server = attached(clock, daemon)
    assert daemon.taken == 1
    for _ in range(3):
        clock.now += 0.5
        server.tick()
    assert daemon.taken == 1
    clock.now += 0.5
    server.tick()
    assert daemon.taken == 2


def test_the_tick_after_a_read_shows_what_changed() -> None:
    """A read asks for the next document: what changed since is shown one tick later."""
    clock, daemon = Clock(), Daemon()
    server = attached(clock, daemon)
    daemon.slots = 3
    clock.now += 0.5
    server.tick()
    assert shown_slots(server) == 0  # built before the change, and read now
    daemon.slots = 4
    clock.now += 0.5
    server.tick()
    assert shown_slots(server) == 4


def test_a_new_stage_is_shown_from_the_next_tick_unread() -> None:
    """Starting, running, stopping: each shows a tick after the worker reaches it, not at the
    next refresh (Multica's CLI reads once, and a daemon running for a second said starting)."""
    clock, daemon = Clock(), Daemon()
    stages = ["starting"]

    def snapshot() -> DaemonSnapshot:
        return dataclasses.replace(daemon.snapshot(), status=stages[-1])

    server = HealthServer("127.0.0.1:0", Metrics(), clock=clock, tick=0.5)
    server.attach(snapshot, lambda: None, stage=lambda: stages[-1])
    shown = []
    for stage in ("running", "running", "stopping"):
        stages.append(stage)
        clock.now += 0.5
        server.tick()
        doc = json.loads(server.route("GET", "/health", "127.0.0.1", LOCAL).body)
        shown.append((doc["status"], doc["stage"]))
    assert shown == [("running", "running"), ("running", "running"), ("running", "stopping")]
    assert daemon.taken == 4  # the attach, two new stages, the read in between


def test_liveness_and_the_chart_go_on_every_tick() -> None:
    """`/healthz` stays fresh and the chart samples the lag on ticks that build nothing."""
    clock, daemon = Clock(), Daemon()
    # Ticks 0.5 s apart on the test's clock, of a port that would tick every 15 s (1 min refresh).
    server = HealthServer("127.0.0.1:0", Metrics(), clock=clock, tick=15.0, stale_after=1.0)
    lags = iter([0.25, 0.75, 0.5, 0.0])
    server.attach(daemon.snapshot, lambda: None, lag=lambda: next(lags))
    for _ in range(4):
        clock.now += 0.5
        server.tick()
    assert daemon.taken == 1
    assert server.route("GET", "/healthz", "127.0.0.1", LOCAL).status == 200
    assert [s.lag_seconds for s in server.page.samples.series] == [0.75, 0.5]


def test_under_systemd_every_tick_builds_until_ready_is_sent(tmp_path: Path) -> None:
    """READY=1 must not wait for a refresh: until it is sent each tick builds the document."""
    path = tmp_path / "notify"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(path))
    listener.settimeout(5)
    clock, daemon = Clock(), Daemon()
    server = HealthServer(
        "127.0.0.1:0", Metrics(), clock=clock, tick=15.0, notifier=Notifier(str(path))
    )
    status = iter(["starting", "starting", "running", "running", "running"])

    def snapshot() -> DaemonSnapshot:
        return dataclasses.replace(daemon.snapshot(), status=next(status))

    server.attach(snapshot, lambda: None)
    for _ in range(3):
        clock.now += 0.5
        server.tick()
    assert daemon.taken == 3
    assert listener.recv(4096).startswith(b"READY=1")
    clock.now += 0.5
    server.tick()
    assert daemon.taken == 3
    listener.close()


def test_the_pages_files_ask_for_no_document_its_json_does() -> None:
    """Loading the page's script asks for nothing; its JSON, which shows the snapshot, asks for
    a fresh one on the next tick."""
    clock, daemon = Clock(), Daemon()
    server = attached(clock, daemon)
    assert server.route("GET", "/page.js", "127.0.0.1", LOCAL).status == 200
    clock.now += 0.5
    server.tick()
    assert daemon.taken == 1
    assert server.route("GET", "/page.json", "127.0.0.1", LOCAL).status == 200
    clock.now += 0.5
    server.tick()
    assert daemon.taken == 2
