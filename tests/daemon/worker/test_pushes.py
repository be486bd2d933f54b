"""The pending-work heartbeat's limits: one a second per runtime, never two at once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import daemon
from daemon.cli.discovery import available
from daemon.config import Settings
from daemon.protocol.client import ServerClient, make_http_client
from daemon.testing import FakeClock
from daemon.worker.heartbeats import Heartbeats
from daemon.worker.pushes import MIN_INTERVAL, Pushes
from daemon.worker.registration import Registration
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import daemon_env, eventually

pytestmark = pytest.mark.anyio


def beats(fake: MulticaFake) -> int:
    return len(fake.seen("heartbeat"))


async def test_one_pushed_heartbeat_a_second_per_runtime(tmp_path: Path) -> None:
    """A hint within a second of the last pushed heartbeat is dropped; after it, one is sent;
    another runtime's hint is not held by the first's limit."""
    async with multica_server() as fake:
        settings = Settings.from_env(daemon_env(tmp_path, fake.url))
        clock = FakeClock()
        async with make_http_client(fake.url, settings.token, daemon.__version__) as http:
            client = ServerClient(http)
            registration = Registration(
                client, settings, await available(settings), "d1", clock=clock
            )
            await registration.register_when_reachable()
            (runtime,) = registration.runtimes
            pushes = Pushes(registration, Heartbeats(registration, client, settings), clock=clock)
            async with anyio.create_task_group() as tg:
                await tg.start(pushes.run)
                pushes.pending_work(runtime.id, "model_list")
                pushes.pending_work(runtime.id, "model_list")  # in flight: dropped
                await eventually(lambda: beats(fake) == 1 and not pushes.in_flight)
                clock.advance(MIN_INTERVAL / 2)
                pushes.pending_work(runtime.id, "model_list")  # too soon: dropped
                pushes.pending_work("not-ours", "model_list")  # not ours: ignored
                assert pushes.beats == 1
                clock.advance(MIN_INTERVAL / 2)
                pushes.pending_work(runtime.id, "model_list")
                await eventually(lambda: beats(fake) == 2)
                assert pushes.beats == 2
                tg.cancel_scope.cancel()
