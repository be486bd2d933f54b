"""Re-registering after the server deletes runtimes: once per wave, backing off after failures."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import pytest

import daemon
from daemon.cli.discovery import available
from daemon.config import Settings
from daemon.protocol.client import ServerClient, make_http_client
from daemon.protocol.release import cli_version
from daemon.protocol.runtime_actions import PendingActions
from daemon.protocol.runtime_models import RuntimeInfo
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


async def test_runtimes_are_named_and_versioned_as_gos(tmp_path: Path) -> None:
    """`Scripted (<device>)` with the CLI's version line, which the server shows as the device
    (`<device> · <version>`), as Multica's daemon registers them."""
    async with registered(tmp_path, MULTICA_DAEMON_DEVICE_NAME="box") as (fake, registration, _):
        (runtime,) = registration.runtimes
        version = await runtime.backend.detect()
        row = fake.runtimes[runtime.id]
        assert (row.name, row.version) == ("Scripted (box)", version)
        assert row.device_info == f"box · {version}"


async def test_a_runtime_of_a_legacy_id_is_folded_into_ours(tmp_path: Path) -> None:
    """A runtime this machine registered under an older id (its host name, before ids were
    UUIDs) gives its tasks to the new one and is gone, as Multica merges `legacy_daemon_ids`."""
    async with multica_server() as fake, httpx.AsyncClient(base_url=fake.url) as http:
        body = {
            "workspace_id": fake.workspace_id,
            "daemon_id": "Old-Host",
            "device_name": "old-host",
            "cli_version": "0.2.0",
            "runtimes": [{"name": "Scripted", "type": "scripted", "version": "1"}],
        }
        old = (await http.post("/api/daemon/register", json=body)).json()["runtimes"][0]["id"]
        settings = Settings.from_env(daemon_env(tmp_path, fake.url))
        async with make_http_client(fake.url, settings.token, daemon.__version__) as client:
            backends = await available(settings)
            registration = Registration(
                ServerClient(client), settings, backends, "d1", legacy_ids=["old-host", "x"]
            )
            await registration.register_when_reachable()
        (new,) = registration.runtimes
        assert fake.merged_runtimes == {old: new.id}
        assert [r.id for r in fake.live_runtimes()] == [new.id]
        sent = fake.seen("register")[-1].body
        assert sent["legacy_daemon_ids"] == ["old-host", "x"]


async def test_one_heartbeat_takes_every_queued_skill_import() -> None:
    """The heartbeat says `supports_batch_import`, so Multica hands out its whole batch (up to
    10) at once instead of one import per heartbeat; all are answered."""
    async with multica_server() as fake, make_http_client(fake.url, "", "1") as http:
        client = ServerClient(http)
        scripted = RuntimeInfo(name="Scripted", type="scripted")
        answer = await client.register(fake.workspace_id, "d1", "box", "1", [scripted])
        runtime_id = answer.runtimes[0].id
        asked = [fake.queue_skill_import(f"skill-{n}") for n in range(3)]
        beat = await client.heartbeat(runtime_id)
        assert [p.id for p in beat.pending_local_skill_imports] == asked
        assert fake.skill_imports == []
        async with anyio.create_task_group() as tg:
            PendingActions(client).handle(tg, runtime_id, "scripted", beat)
        assert sorted(r["request_id"] for r in fake.action_results) == sorted(asked)


async def test_a_runtime_registered_again_under_its_own_id_keeps_its_running_tasks(
    tmp_path: Path,
) -> None:
    """A 404 the server did not mean (another server answering on its address) drops a runtime
    that still exists: registering again returns the same id, and its tasks, running here, are
    not recovered as orphans (they were failed under their running agents once)."""
    async with registered(tmp_path) as (fake, registration, clock):
        (runtime,) = registration.runtimes
        task_id = fake.queue(provider=runtime.backend.name)
        settings = Settings.from_env(daemon_env(tmp_path, fake.url))
        async with make_http_client(fake.url, settings.token, daemon.__version__) as http:
            (claimed,) = await ServerClient(http).claim("d1", [runtime.id], 1)
        assert claimed.id == task_id
        clock.advance(1)
        await registration.runtime_gone(runtime.id)
        assert registers(fake) == 2
        assert [r.id for r in registration.runtimes] == [runtime.id]
        assert fake.seen("recover-orphans") == []
        assert fake.tasks[task_id].status == "dispatched"
