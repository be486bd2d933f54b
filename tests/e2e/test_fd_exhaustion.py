"""Running out of file descriptors: logged and retried, never the end of the daemon."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from tests.helpers import embedded_server, eventually, running_daemon

pytestmark = pytest.mark.anyio


@contextmanager
def no_free_descriptors() -> Iterator[None]:
    """While inside, opening any file or socket in this process fails with EMFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    fillers: list[int] = []
    try:
        # Descriptors are numbered lowest-free first: fill every gap below the limit too.
        while True:
            try:
                fillers.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                break
        yield
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_outbox_loop_survives_emfile_and_the_daemon_keeps_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """EMFILE while the outbox loop looks at its directory is logged; tasks still complete."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(
            tmp_path, url, outbox_interval=0.05, MULTICA_DAEMON_HEARTBEAT_INTERVAL="1000h"
        ) as d,
    ):
        with no_free_descriptors():
            await eventually(lambda: "outbox: re-send failed" in caplog.text)
        await anyio.sleep(0.2)
        task_id = await d.submit({"steps": [{"result": {"output": "still here"}}]})
        task = await d.wait(task_id)
    assert task["status"] == "completed"
    assert "Too many open files" in caplog.text
