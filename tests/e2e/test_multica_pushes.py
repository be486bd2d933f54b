"""A daemon against the Multica-faithful server's pushes: a new workspace gets its runtime at
once, and a pending-work hint brings that runtime's heartbeat forward, once a second at most."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio

# Neither the workspace sync nor a scheduled heartbeat comes on its own during a test: what
# happens, a push caused.
QUIET = {
    "MULTICA_DAEMON_HEARTBEAT_INTERVAL": "1h",
    "MULTICA_DAEMON_WORKSPACE_SYNC_INTERVAL": "1h",
    "MULTICA_DAEMON_POLL_INTERVAL": "1h",
}


def beats(fake: MulticaFake, runtime_id: str) -> int:
    """How many heartbeats the server read for one runtime."""
    return sum(1 for r in fake.seen("heartbeat") if r.body["runtime_id"] == runtime_id)


async def test_a_created_workspace_gets_a_runtime_at_once(tmp_path: Path) -> None:
    """`daemon:workspaces_changed` syncs now: the new workspace's runtime is registered and
    its tasks are claimed, long before the hourly sync."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, control=True, **QUIET) as d,
    ):
        await d.worker.pickup.channel.connected.wait()
        began = anyio.current_time()
        workspace_id = fake.create_workspace("Launch")
        await eventually(lambda: len(fake.live_runtimes(workspace_id)) == 1, within=5.0)
        took = anyio.current_time() - began
        (runtime,) = fake.live_runtimes(workspace_id)
        assert runtime.daemon_id == d.worker.registration.daemon_id
        task_id = fake.queue_issue(workspace_id=workspace_id)
        assert (await fake.finished(task_id, within=20.0)).status == "completed"
    assert took < 5.0


async def test_pending_work_sends_one_heartbeat_and_its_request_is_answered(
    tmp_path: Path,
) -> None:
    """A model-list request pushed as `daemon:pending_work` is answered by a heartbeat sent
    at once, not at the next (hourly) one."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, control=True, **QUIET) as d,
    ):
        await d.worker.pickup.channel.connected.wait()
        (runtime,) = fake.live_runtimes()
        before = beats(fake, runtime.id)
        request_id = fake.request_models(runtime.id)
        await eventually(lambda: any(r["request_id"] == request_id for r in fake.action_results))
        assert beats(fake, runtime.id) == before + 1
        (answer,) = fake.action_results
        assert (answer["kind"], answer["runtime_id"]) == ("models", runtime.id)


async def test_a_burst_of_pending_work_costs_one_heartbeat(tmp_path: Path) -> None:
    """Ten hints for one runtime at once: one heartbeat; a hint for a runtime that is not the
    daemon's: none."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, control=True, **QUIET) as d,
    ):
        await d.worker.pickup.channel.connected.wait()
        (runtime,) = fake.live_runtimes()
        before = beats(fake, runtime.id)
        syncs = len(fake.seen("workspaces"))
        for _ in range(10):
            fake.push_pending_work(runtime.id)
        fake.send_frame('{"type": "daemon:pending_work", "payload": {"runtime_id": "other"}}')
        # Frames are handled in order: once the sync this one asks for is seen, every hint
        # before it was handled.
        fake.send_frame('{"type": "daemon:workspaces_changed"}')
        await eventually(lambda: len(fake.seen("workspaces")) > syncs)
        await eventually(lambda: beats(fake, runtime.id) == before + 1)
        assert d.worker.pushes.beats == 1
