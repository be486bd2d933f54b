"""Re-registering after the server deletes runtimes: once per wave, backing off after failures."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

import daemon
from daemon.cli.discovery import available
from daemon.config import Settings
from daemon.protocol.client import ServerClient, make_http_client
from daemon.protocol.release import cli_version
from daemon.testing import FakeClock
from daemon.worker.registration import FAILURE_BACKOFF, Registration
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.fakes.multica_versions import FLOORS, meets
from tests.helpers import daemon_env

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def registered(
    home: Path, **env: str
) -> AsyncIterator[tuple[MulticaFake, Registration, FakeClock]]:
    """A fake server and a Registration on it (fake clock), registered in its one workspace."""
    async with multica_server() as fake:
        settings = Settings.from_env(daemon_env(home, fake.url, **env))
        clock = FakeClock()
        async with make_http_client(fake.url, settings.token, daemon.__version__) as http:
            backends = await available(settings)
            registration = Registration(ServerClient(http), settings, backends, "d1", clock=clock)
            await registration.register_when_reachable()
            yield fake, registration, clock


def registers(fake: MulticaFake) -> int:
    return len(fake.seen("register"))


async def test_runtimes_gone_together_cost_one_register(tmp_path: Path) -> None:
    """Two runtimes of a workspace reported gone at once: one register replaces both."""
    command = {"MULTICA_COMMAND_PATH": sys.executable}
    async with registered(tmp_path, **command) as (fake, registration, _clock):
        old = [r.id for r in registration.runtimes]
        assert len(old) == 2
        for runtime_id in old:
            fake.delete_runtime(runtime_id)
        async with anyio.create_task_group() as tg:
            for runtime_id in old:
                tg.start_soon(registration.runtime_gone, runtime_id)
        assert registers(fake) == 2
        new = {r.id for r in registration.runtimes}
        assert new == {r.id for r in fake.live_runtimes()} and not new & set(old)


async def test_a_later_deletion_is_not_held_by_the_coalescing_window(tmp_path: Path) -> None:
    """After a successful re-register the next deletion registers again at once."""
    async with registered(tmp_path) as (fake, registration, clock):
        for expected in (2, 3):
            (runtime,) = registration.runtimes
            fake.delete_runtime(runtime.id)
            clock.advance(1)
            await registration.runtime_gone(runtime.id)
            assert registers(fake) == expected
            assert [r.id for r in registration.runtimes] == [r.id for r in fake.live_runtimes()]


async def test_a_failed_re_register_backs_off_for_a_minute(tmp_path: Path) -> None:
    """A refused re-register is not tried again for 60 s; after that it is."""
    async with registered(tmp_path) as (fake, registration, clock):
        (runtime,) = registration.runtimes
        workspace = runtime.workspace_id
        fake.refuse_register(workspace)
        fake.delete_runtime(runtime.id)
        await registration.runtime_gone(runtime.id)
        assert (registers(fake), registration.runtimes) == (2, [])
        clock.advance(FAILURE_BACKOFF - 1)
        await registration.reregister(workspace, clock())
        assert registers(fake) == 2
        fake.refused_registers.clear()
        clock.advance(2)
        await registration.reregister(workspace, clock())
        assert registers(fake) == 3
        assert [r.id for r in registration.runtimes] == [r.id for r in fake.live_runtimes()]


async def test_an_unknown_runtime_id_changes_nothing(tmp_path: Path) -> None:
    """A 404 for a runtime already dropped (by a sibling or a sync) registers nothing."""
    async with registered(tmp_path) as (fake, registration, _clock):
        await registration.runtime_gone("not-ours")
        assert registers(fake) == 1 and len(registration.runtimes) == 1


async def test_registered_runtimes_open_every_feature_multica_gates_on_the_version(
    tmp_path: Path,
) -> None:
    """Each runtime's `cli_version`, as the server stored it, meets every Multica floor."""
    async with registered(tmp_path) as (fake, registration, _clock):
        rows = [fake.runtimes[r.id] for r in registration.runtimes]
        assert rows
        for row in rows:
            assert row.cli_version == cli_version()
            assert all(meets(row.cli_version, floor) for floor in FLOORS.values())
