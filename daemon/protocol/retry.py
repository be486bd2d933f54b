"""When, and for how long, something that failed is tried again: one policy type for all.

Server calls use two policies:

* `RetryPolicy()` — ordinary calls: transport errors, 5xx and 408 are retried after 1s, 2s and
  4s (3 retries, 4 tries in all); a 429 is retried up to 5 tries in all.
* `RetryPolicy.for_reports()` — terminal reports (`complete`, `fail`, `cancel-ack`), whose loss
  would lose a task's result: 4s, 8s, 16s, 32s, 64s.

Jitter: every backoff delay is scaled by a factor drawn uniformly from [0.8, 1.2) (±20%), so a
fleet of daemons that lost the server at the same moment does not come back in lockstep. A 429's
`Retry-After` (seconds or an HTTP-date) is a floor set by the server, so its jitter only adds
(up to +20%); every wait is capped at 300s. Permanent errors are never retried; the caller
decides what is permanent (see daemon/errors.py) — this module only answers "how long to wait".
The worker's registration, the task's idle retries and the task API's calls use the same type
with their own delays, limits and no jitter.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

import anyio

DEFAULT_DELAYS = (1.0, 2.0, 4.0)
REPORT_DELAYS = (4.0, 8.0, 16.0, 32.0, 64.0)
THROTTLED_TRIES = 5
MAX_WAIT = 300.0
JITTER = 0.2


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds a `Retry-After` header asks for (never negative), or None if it is unusable.

    `now` is the wall-clock time (seconds since the epoch) an HTTP-date is measured against.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000" parses as naive; HTTP-dates are always GMT
            when = when.replace(tzinfo=UTC)
        return max(0.0, when.timestamp() - now)
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to wait before each retry, and when to give up: the one type for every loop
    in the daemon that tries again (server calls, registration, idle retries, the task API)."""

    delays: Sequence[float] = DEFAULT_DELAYS
    """Base wait before retry 1, 2, ...; past the end the last one is multiplied by `growth`
    once more per retry (1.0 repeats it)."""
    max_tries: int | None = None
    """Tries in all, the first included; None: one more than there are delays; 0: no limit."""
    throttled_tries: int = THROTTLED_TRIES
    """Tries in all after a 429 (never fewer than `tries`)."""
    growth: float = 2.0
    max_wait: float = MAX_WAIT
    jitter: float = JITTER
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    rng: Callable[[], float] = random.random
    wall_clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        object.__setattr__(self, "delays", tuple(float(d) for d in self.delays))

    @classmethod
    def for_reports(
        cls,
        *,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        rng: Callable[[], float] = random.random,
        wall_clock: Callable[[], float] = time.time,
    ) -> RetryPolicy:
        """The longer policy for terminal reports: 4s, 8s, 16s, 32s, 64s."""
        return cls(REPORT_DELAYS, sleep=sleep, rng=rng, wall_clock=wall_clock)

    @classmethod
    def never(cls) -> RetryPolicy:
        """One try, no retry at all (e.g. an outbox flush, which is itself retried later)."""
        return cls((), throttled_tries=1)

    @property
    def tries(self) -> float:
        """Tries in all (first one included) for transport errors, 5xx and 408."""
        if self.max_tries is None:
            return len(self.delays) + 1
        return self.max_tries or math.inf

    def budget(self) -> float:
        """The longest this policy can spend waiting between tries (jitter at its maximum)."""
        return min(self.max_wait * len(self.delays), sum(self.delays) * (1 + self.jitter))

    def delay(
        self, failures: int, *, throttled: bool = False, retry_after: str | None = None
    ) -> float | None:
        """Seconds to wait after `failures` failed tries, or None when it is time to give up.

        `throttled` says the last failure was a 429, whose `retry_after` header is honoured.
        """
        limit = max(self.throttled_tries, self.tries) if throttled else self.tries
        if failures < 1 or failures >= limit:
            return None
        if throttled:
            asked = retry_after_seconds(retry_after, self.wall_clock())
            if asked is not None:
                return min(self.max_wait, asked * (1 + self.jitter * self.rng()))
        return min(self.max_wait, self._base(failures) * (1 + self.jitter * (2 * self.rng() - 1)))

    def _base(self, failures: int) -> float:
        delays = tuple(self.delays)
        if not delays:
            return 0.0
        if failures <= len(delays):
            return delays[failures - 1]
        return delays[-1] * self.growth ** (failures - len(delays))
