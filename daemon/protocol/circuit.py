"""The circuit breaker that pauses claims while the server keeps failing.

Three consecutive failed calls (after their retries) open the circuit: claims stop for the
cooldown, then exactly one probe claim is let through (half-open). A success anywhere closes it;
a failure while half-open opens it again. Only claims ask `allow()`; heartbeats and terminal
reports are never blocked, but their outcomes are recorded, so a heartbeat that gets through
closes the circuit as well.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Literal

from daemon.ops.metrics import CIRCUIT_STATES, Metrics

log = logging.getLogger(__name__)

CircuitState = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    """Counts consecutive server failures and decides whether a claim may go out."""

    def __init__(
        self,
        threshold: int = 3,
        cooldown: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        metrics: Metrics | None = None,
    ) -> None:
        if threshold < 1:
            raise ValueError("threshold must be at least 1")
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self._metrics = metrics
        self._failures = 0
        self._opened_at: float | None = None
        self._probe_at: float | None = None
        self._shown: CircuitState | None = None
        self._publish(self.state)

    @property
    def state(self) -> CircuitState:
        """`closed`, `open`, or `half_open` once the cooldown of an open circuit has passed."""
        if self._opened_at is None:
            state: CircuitState = "closed"
        elif self._clock() - self._opened_at < self.cooldown:
            state = "open"
        else:
            state = "half_open"
        self._publish(state)
        return state

    @property
    def failures(self) -> int:
        """Consecutive failures recorded since the last success."""
        return self._failures

    def seconds_until_probe(self) -> float:
        """How long until `allow()` may answer True again (0 when it would now)."""
        if self._opened_at is None:
            return 0.0
        start = self._opened_at if self._probe_at is None else self._probe_at
        return max(0.0, start + self.cooldown - self._clock())

    def allow(self) -> bool:
        """True if a claim may go out now; in half-open state only one probe gets True."""
        state = self.state
        if state == "closed":
            return True
        if state == "open":
            return False
        now = self._clock()
        # A probe whose outcome never came back (its caller was cancelled) must not wedge the
        # circuit half-open forever: after another cooldown, a new probe may go.
        if self._probe_at is not None and now - self._probe_at < self.cooldown:
            return False
        self._probe_at = now
        return True

    def record_success(self) -> None:
        """The server answered: close the circuit and forget past failures."""
        self._failures = 0
        self._opened_at = None
        self._probe_at = None
        self._publish(self.state)

    def record_failure(self) -> None:
        """A call failed for good (retries exhausted); open the circuit at the threshold."""
        state = self.state
        self._failures += 1
        # Failures while already open do not push the cooldown further out: the probe schedule
        # stays predictable even while heartbeats keep failing.
        if state == "half_open" or (state == "closed" and self._failures >= self.threshold):
            self._opened_at = self._clock()
            self._probe_at = None
        self._publish(self.state)

    def _publish(self, state: CircuitState) -> None:
        if state == self._shown:
            return
        if self._shown is not None:
            if state == "open":
                log.warning(
                    "server circuit open after %d consecutive failures; claims pause for %.0fs",
                    self._failures,
                    self.cooldown,
                )
            elif state == "half_open":
                log.info("server circuit half-open: one probe claim allowed")
            else:
                log.info("server circuit closed")
        self._shown = state
        if self._metrics is not None:
            self._metrics.circuit_state.set(CIRCUIT_STATES[state])
