"""The prepare lease is renewed while a task is set up, through failures."""

from __future__ import annotations

import pytest

from daemon.errors import TransientServerError
from daemon.task.prepare_lease import prepare_lease
from daemon.testing import FakeTaskServer, factories
from daemon.testing.waits import wait_for

pytestmark = pytest.mark.anyio


async def test_the_lease_is_renewed_through_a_failure_until_the_block_ends() -> None:
    """A refused renewal is not the end: the next one is sent."""
    server = FakeTaskServer()
    server.fail("extend_prepare_lease", TransientServerError("prepare_lease", "down", 503), times=1)
    task = factories.task(runtime_id="rt-1")
    async with prepare_lease(server, task, every=0.01):
        await wait_for(
            lambda: server.count("extend_prepare_lease") >= 3, what="three renewals", within=10
        )
    assert server.calls[0].task_id == task.id
