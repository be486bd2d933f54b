"""The error boundary of one round of a long-lived loop (listen, heartbeat, renewal, workspace
sync, outbox, claim): whatever one round raises is logged and costs that round only.

Expected failures (a `ServerError`, a refused file) are handled where they happen; this catches
what nobody expected — a defect, an answer shaped in a way no parser foresaw — so that it can
never end the task group the daemon runs in. Cancellation is not an `Exception` and passes.
"""

from __future__ import annotations

import logging
from types import TracebackType

log = logging.getLogger(__name__)


class RoundBoundary:
    """`with boundary:` around one round; logs each distinct failure with its traceback once,
    a repeat of the same failure as one line."""

    def __init__(self, loop: str) -> None:
        self.loop = loop
        self.failures = 0
        self._last = ""

    def __enter__(self) -> RoundBoundary:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        self.failures += 1
        seen = f"{type(exc).__name__}: {exc}"[:300]
        if seen == self._last:
            log.error("%s: round failed again (%s); next round as usual", self.loop, seen)
        else:
            self._last = seen
            log.error("%s: round failed; next round as usual", self.loop, exc_info=exc)
        return True
