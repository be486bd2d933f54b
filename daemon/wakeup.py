"""A coalescing wake-up signal: the claim loop's (and a run's status check's) early alarm."""

from __future__ import annotations

import anyio


class Wakeup:
    """Any number of `set()` calls before or during a wait end that one wait, nothing more.

    A `set()` that arrives while nobody waits (say, while a claim is under way) is kept, so
    the next wait returns at once: a task queued during a claim is never left to the poll.
    Set it from the event loop's thread only (route handlers and tasks, not worker threads).
    """

    def __init__(self) -> None:
        self._event = anyio.Event()

    def set(self) -> None:
        """Wake the current or the next waiter."""
        self._event.set()

    async def wait(self, seconds: float) -> bool:
        """Wait until set or for `seconds` at most; True when woken. Consumes the signal."""
        with anyio.move_on_after(seconds):
            await self._event.wait()
        if not self._event.is_set():
            return False
        self._event = anyio.Event()
        return True
