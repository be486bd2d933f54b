"""A claimed task's prepare lease: renewed while the task is set up, until its start.

Multica hands a task that was claimed but never started to a claim again once the claim's
answer may have been lost (90 s) and the task's prepare lease (45 s from the claim or its last
renewal) has run out. Resolving skill bundles, waiting for an agent user of the pool and laying
out the task's directories can take longer than that, and the same task would then be set up
twice. So, as Multica's daemon does, the lease is renewed every 15 s
(`POST /api/daemon/runtimes/{rid}/tasks/{tid}/prepare-lease`) from the claim until `start` is
acknowledged; a failed renewal is logged, and the next one tries again.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from daemon.errors import ServerError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer
from daemon.protocol.models import Task

log = logging.getLogger(__name__)

RENEWAL_WITHIN = 10.0
"""Seconds one renewal may take (Multica's bound)."""


@asynccontextmanager
async def prepare_lease(client: TaskServer, task: Task, every: float) -> AsyncIterator[None]:
    """Renew `task`'s lease every `every` seconds while the block runs (a server that did not
    name the task's runtime has no lease to renew)."""
    async with anyio.create_task_group() as tg:
        if task.runtime_id:
            tg.start_soon(_renew, client, task, every)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


async def _renew(client: TaskServer, task: Task, every: float) -> None:
    while True:
        await anyio.sleep(every)
        with anyio.move_on_after(RENEWAL_WITHIN) as bounded:
            try:
                await client.extend_prepare_lease(task.runtime_id, task.id)
            except ServerError as exc:
                log.warning(
                    "task %s: renewing the prepare lease failed: %s", short_id(task.id), exc
                )
                continue
        if bounded.cancelled_caught:
            log.warning(
                "task %s: renewing the prepare lease took over %ss",
                short_id(task.id),
                RENEWAL_WITHIN,
            )
