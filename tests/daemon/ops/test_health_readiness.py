"""Readiness and the daemon's status follow registration at once, not the health port's next
refresh: a probe right after start-up must not see the `starting` of two seconds before."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import httpx
import pytest

from backends.scripted import ScriptedBackend
from daemon.ops.metrics import Metrics
from daemon.protocol.runtime_models import RecoverOrphansResponse
from daemon.testing import FakeTaskServer, settings_in, worker
from tests.daemon_child import daemon_child
from tests.helpers import daemon_env, embedded_server, eventually, serving_health

pytestmark = pytest.mark.anyio


class HeldStartup(FakeTaskServer):
    """Holds the last step of start-up (recover-orphans, after the register) until released:
    the daemon is registered, and still starting."""

    def __init__(self, *, workspaces: Sequence[str] = ("ws-1",)) -> None:
        super().__init__(workspaces=workspaces)
        self.release = anyio.Event()

    async def recover_orphans(self, runtime_id: str) -> RecoverOrphansResponse:
        await self.release.wait()
        return await super().recover_orphans(runtime_id)


async def test_readyz_and_the_status_follow_registration_with_no_tick_in_between(
    tmp_path: Path,
) -> None:
    """On a port that ticks once a minute, the first `/readyz` after the register is 200, and
    the first `/health` after start-up says `running`: each change is published as it happens."""
    server, metrics = HeldStartup(), Metrics()
    daemon = worker(
        settings_in(tmp_path), server, {"scripted": (ScriptedBackend(), "1.0")}, metrics=metrics
    )
    async with (
        serving_health(daemon, metrics, tick=60.0) as url,
        httpx.AsyncClient(base_url=url, timeout=5) as http,
        anyio.create_task_group() as tg,
    ):
        before = await http.get("/readyz")
        tg.start_soon(daemon.run)
        await eventually(lambda: daemon.registered, what="the register answered")
        ready = await http.get("/readyz")
        registered = (await http.get("/health")).json()
        server.release.set()
        await eventually(lambda: daemon.status == "running", what="start-up done")
        running = (await http.get("/health")).json()["status"]
        daemon.request_stop()
        stopping = (await http.get("/health")).json()
        stopping = (stopping["status"], stopping["stage"])
    assert before.status_code == 503 and before.json()["reason"] == "not registered yet"
    assert ready.status_code == 200, ready.json()
    assert (registered["status"], registered["registered"]) == ("starting", True)
    # Multica's CLI counts a daemon alive while `status` says running; `stage` says it stops.
    assert (running, stopping) == ("running", ("running", "stopping"))


async def test_agent_daemon_run_is_ready_on_the_first_probe_after_it_started(
    tmp_path: Path,
) -> None:
    """`agent-daemon run` wires its worker to its port: probed once right after its `started:`
    line, `/readyz` is 200 and `/health` says `running`."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        daemon_child(daemon_env(tmp_path, url)) as child,
    ):
        await eventually(lambda: "started:" in child.log, what="the started line")
        async with httpx.AsyncClient(base_url=child.health_url, timeout=5) as http:
            ready = await http.get("/readyz")
            status = (await http.get("/health")).json()["status"]
        assert await child.stop() == 0
    assert ready.status_code == 200, ready.json()
    assert status == "running"
