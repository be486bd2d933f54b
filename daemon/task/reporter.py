"""What the server hears about one task: its live transcript, then usage and the terminal call,
and the outbox for whatever the server does not take."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import anyio

from daemon.logs import short_id
from daemon.protocol.pacing import Beat
from daemon.services import Services
from daemon.shutdown import REPORT
from daemon.state.outbox import Delivery, Leftover
from daemon.task.outcome import Outcome
from daemon.task.transcript import Transcript

log = logging.getLogger(__name__)

TRANSCRIPT_CLOSE = 30.0
"""Seconds the final transcript flush keeps retrying; what is left then goes to the outbox."""


class Reporter:
    """Streams one task's transcript and reports its outcome exactly once."""

    def __init__(
        self,
        task_id: str,
        backend: str,
        services: Services,
        told: Callable[[str], None] | None = None,
    ) -> None:
        """`told` hears the task's status whenever a transcript answer names it."""
        self.task_id = task_id
        self.backend = backend
        self.id = short_id(task_id)
        self._client = services.client
        self._outbox = services.outbox
        self._budget = services.budget
        self._metrics = services.metrics
        self.transcript = Transcript(
            services.client,
            task_id,
            services.metrics,
            budget=services.budget,
            beat=Beat(
                services.pacing.transcript_interval,
                functools.partial(services.pacing.offset, task_id),
            ),
            told=told,
        )

    async def stream(self) -> None:
        """Send the transcript every interval until cancelled."""
        await self.transcript.run()

    async def close(self) -> None:
        """The final transcript flush, shielded and bounded; the rest waits for `report`."""
        await self.transcript.close(within=TRANSCRIPT_CLOSE)

    async def report(self, outcome: Outcome) -> None:
        """The transcript's rest, usage, then the terminal call; what the server does not take
        goes to the outbox (a transient `complete` failure stays a `complete`)."""
        if outcome.report is None:
            log.info("task %s: settled by the server", self.id)
        leftover = Leftover(
            task_id=self.task_id,
            report=outcome.report,
            messages=tuple(self.transcript.pending()),
            usage=outcome.usage,
        )
        delivery = Delivery(leftover, self._metrics)
        # Once the daemon is stopping, the report gets a short allowance and a single try.
        stopping = self._budget.stopping
        with anyio.CancelScope() as scope, self._budget.bounding(scope, REPORT):
            await delivery.send(self._client, retry=not stopping)
        left = delivery.left
        if not left.empty:
            # Said after the write, so the log never claims a report is on disk when it is not.
            kept = "kept in the outbox" if self._outbox.put(left) else "kept in memory"
            log.error(
                "task %s: %s not delivered, %s: %s",
                self.id,
                left.kind or f"transcript ({len(left.messages)} messages)",
                kept,
                delivery.error or "out of time while stopping",
            )
        if outcome.report is not None:
            why = f" reason={outcome.failure_reason}" if outcome.failure_reason else ""
            log.info("task %s: %s backend=%s%s", self.id, outcome.status, self.backend, why)
