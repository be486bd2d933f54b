"""How the worker claims: over the control WebSocket once its server said `rpc-v1`, else over
HTTP, with the same body and answer either way (Multica's `ClaimTasksWSFirst`).

A claim whose frame never left (no connection, `rpc-v1` not said) goes over HTTP at once; so
does one the server answered with an error (it claimed nothing). A claim whose frame left but
whose answer did not come (a timeout, the connection lost) may have been made on the server:
claiming again at once could hand this daemon more tasks than it has free slots. So, as Go's
daemon does, the next claim waits out the server's budget plus the grace (`BUDGET + GRACE`,
7 s) and then goes over HTTP once, so a socket that keeps failing cannot starve queued tasks.
The tasks such a lost answer carried stay `dispatched` to this daemon and unstarted; the
server hands them out again in a later claim (Multica re-delivers a dispatched task nobody
started after 90 s, `ReclaimStaleDispatchedTasksForRuntimes`), and they start then, once:
`Runs.admit` takes each id once.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

from daemon.errors import ServerError, SocketUnavailableError, UnconfirmedError
from daemon.protocol.client import ServerClient
from daemon.protocol.control_rpc import GRACE, ControlCalls
from daemon.protocol.models import Task

log = logging.getLogger(__name__)

BUDGET = 5.0
"""Seconds the server may take to make one claim asked over the socket (`timeout_ms`), as
Multica's daemon bounds its batch claim (`batchClaimRequestTimeout`)."""


class Claims:
    """Claims over the socket first, over HTTP when it cannot or after a lost answer."""

    def __init__(
        self,
        client: ServerClient,
        calls: ControlCalls | None,
        *,
        budget: float = BUDGET,
        grace: float = GRACE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`calls`: the control WebSocket's requests (None: claims go over HTTP only);
        `budget` and `grace` as in the module's docstring (tests shorten them)."""
        self._client = client
        self._calls = calls
        self._budget = budget
        self._grace = grace
        self._safety = budget + grace
        self._clock = clock
        self._http_after: float | None = None
        self.over_socket = 0
        """Claims answered on the socket (tests and `status` read it)."""

    def wait_at_most(self) -> float:
        """Seconds until a claim held back by a lost answer may go over HTTP (inf: none is)."""
        if self._http_after is None:
            return math.inf
        return max(0.0, self._http_after - self._clock())

    async def claim(self, daemon_id: str, runtime_ids: Sequence[str], max_tasks: int) -> list[Task]:
        """Up to `max_tasks` tasks for these runtimes; [] while a lost answer's window runs."""
        over_http = False
        if self._http_after is not None:
            if self._clock() < self._http_after:
                return []
            self._http_after = None
            over_http = True
        if not over_http and self._calls is not None and self._calls.ready:
            try:
                tasks = await self._client.claim_over(
                    self._calls, daemon_id, runtime_ids, max_tasks, self._budget, self._grace
                )
            except UnconfirmedError as exc:
                self._http_after = self._clock() + self._safety
                log.warning(
                    "claim over the control socket unconfirmed (%s): the next claim goes over "
                    "HTTP in %gs",
                    exc,
                    self._safety,
                )
                return []
            except SocketUnavailableError:
                pass  # the socket closed since it said `rpc-v1`: nothing left, HTTP now
            except ServerError as exc:
                if exc.status is None or 200 <= exc.status < 300:
                    raise  # a 2xx whose body does not parse: the server acted, HTTP would too
                log.info("claim over the control socket refused (%s): claiming over HTTP", exc)
            else:
                self.over_socket += 1
                return tasks
        return await self._client.claim(daemon_id, runtime_ids, max_tasks)
