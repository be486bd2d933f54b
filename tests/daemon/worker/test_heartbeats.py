"""The HTTP heartbeats beside the control socket's, on a fake clock, against the Multica fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

import daemon
from daemon.cli.discovery import available
from daemon.config import Settings
from daemon.protocol.client import ServerClient, make_http_client
from daemon.protocol.runtime_models import HeartbeatAck
from daemon.testing import FakeClock
from daemon.worker.heartbeats import Heartbeats
from daemon.worker.registration import Registration
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import daemon_env, eventually

pytestmark = pytest.mark.anyio

INTERVAL = 3600.0
"""An interval no test waits for: each HTTP heartbeat here is one the test caused."""


@asynccontextmanager
async def serving(
    tmp_path: Path, clock: FakeClock, interval: str = "1h"
) -> AsyncIterator[tuple[MulticaFake, Heartbeats, str]]:
    """The fake, heartbeats running for its one registered runtime, and that runtime's id."""
    async with multica_server() as fake:
        env = daemon_env(tmp_path, fake.url, MULTICA_DAEMON_HEARTBEAT_INTERVAL=interval)
        settings = Settings.from_env(env)
        async with make_http_client(fake.url, settings.token, daemon.__version__) as http:
            client = ServerClient(http)
            registration = Registration(client, settings, await available(settings), "d1")
            await registration.register_when_reachable()
            (runtime,) = registration.runtimes
            heartbeats = Heartbeats(registration, client, settings, clock=clock)
            async with anyio.create_task_group() as tg:
                await tg.start(heartbeats.run)
                yield fake, heartbeats, runtime.id
                tg.cancel_scope.cancel()


def http_beats(fake: MulticaFake) -> int:
    return len(fake.seen("heartbeat"))


async def test_an_ack_keeps_http_quiet_for_two_intervals(tmp_path: Path) -> None:
    """An ack on the socket counts for two heartbeat intervals, as Multica's freshness
    window; an ack of a runtime that is not ours counts for nothing."""
    clock = FakeClock()
    async with serving(tmp_path, clock) as (_, heartbeats, runtime_id):
        assert not heartbeats.over_socket(runtime_id)
        heartbeats.acked(HeartbeatAck(runtime_id=runtime_id, status="ok"))
        heartbeats.acked(HeartbeatAck(runtime_id="not-ours", status="ok"))
        assert heartbeats.over_socket(runtime_id)
        assert not heartbeats.over_socket("not-ours")
        clock.advance(2 * INTERVAL - 1)
        assert heartbeats.over_socket(runtime_id)
        clock.advance(1)
        assert not heartbeats.over_socket(runtime_id)


async def test_a_dropped_socket_sends_the_quiet_runtimes_heartbeat_at_once(tmp_path: Path) -> None:
    """A drop forgets the acks and the runtime the socket kept alive beats over HTTP now; a
    reconnect for a new runtime set forgets them without a beat."""
    clock = FakeClock()
    async with serving(tmp_path, clock) as (fake, heartbeats, runtime_id):
        heartbeats.acked(HeartbeatAck(runtime_id=runtime_id, status="ok"))
        heartbeats.socket_closed(dropped=False)
        assert not heartbeats.over_socket(runtime_id)
        heartbeats.acked(HeartbeatAck(runtime_id=runtime_id, status="ok"))
        await anyio.wait_all_tasks_blocked()
        assert heartbeats.http_beats == 0
        heartbeats.socket_closed(dropped=True)
        await eventually(lambda: http_beats(fake) == 1)
        assert heartbeats.http_beats == 1


async def test_an_ack_hands_its_pending_actions_over_as_http_would(tmp_path: Path) -> None:
    """A pending model list in an ack is answered, once, as from an HTTP heartbeat."""
    clock = FakeClock()
    async with serving(tmp_path, clock) as (fake, heartbeats, runtime_id):
        listed = {"pending_model_list": {"id": "m1"}}
        ack = HeartbeatAck.model_validate({"runtime_id": runtime_id, "status": "ok", **listed})
        heartbeats.acked(ack)
        heartbeats.acked(ack)
        await eventually(lambda: len(fake.action_results) == 1)
        (result,) = fake.action_results
        assert (result["kind"], result["request_id"]) == ("models", "m1")


async def test_an_interval_of_zero_is_multicas_default_not_a_busy_loop(tmp_path: Path) -> None:
    """`MULTICA_DAEMON_HEARTBEAT_INTERVAL=0` beats every 15 s, as Multica's daemon does: an
    ack keeps HTTP quiet for 30 s, and the loops wait instead of spinning."""
    clock = FakeClock()
    async with serving(tmp_path, clock, "0") as (_, heartbeats, runtime_id):
        heartbeats.acked(HeartbeatAck(runtime_id=runtime_id, status="ok"))
        clock.advance(29)
        assert heartbeats.over_socket(runtime_id)
        await anyio.wait_all_tasks_blocked()
        assert heartbeats.http_beats <= 1  # the first tick's jitter may be 0
        clock.advance(1)
        assert not heartbeats.over_socket(runtime_id)
