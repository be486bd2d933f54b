"""Files an agent (or another user) could plant where the daemon reads: a FIFO or device never
blocks a task, a start-up or a shutdown."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import pytest

from daemon.task.setup.workspace import TASK_MARKER
from tests.fakes.multica_server import multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio


async def test_a_fifo_marker_in_the_prior_work_dir_never_blocks_the_follow_up(
    tmp_path: Path,
) -> None:
    """A follow-up naming a prior work dir whose marker the agent replaced by a FIFO starts at
    once in a fresh directory (the prior one is not proven ours) and completes."""
    agent = {"id": str(uuid.uuid4())}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url) as d:
        first_id = fake.queue_issue("issue-9", agent=agent)
        await eventually(lambda: fake.tasks[first_id].status == "completed")
        prior = Path(fake.tasks[first_id].work_dir)
        marker = prior / TASK_MARKER
        marker.unlink()
        os.mkfifo(marker)
        try:
            second = fake.queue_issue("issue-9", agent=agent, prior_work_dir=str(prior))
            await eventually(lambda: fake.tasks[second].status == "completed", within=10)
            assert fake.tasks[second].work_dir != str(prior)
            await eventually(lambda: d.worker.runs == {})
        finally:
            # A reader still blocked on the FIFO (the defect) is released, so the test ends.
            with contextlib.suppress(OSError):
                os.close(os.open(marker, os.O_WRONLY | os.O_NONBLOCK))
