"""One first start at a time per data directory, for agents that create their database then.

OpenCode migrates a fresh SQLite database when it first starts on a HOME; two copies starting
at once race on it, and the loser exits before its session starts ("Failed query: CREATE
TABLE ..."). A daemon that claims two tasks at once on a new machine starts two. So while no
session has opened yet on a data directory, one run starts there at a time, the others wait
(bounded) until its session is open or it has ended; after that they start freely.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio

FIRST_START_WAIT = 60.0
"""At most this long a run waits for another's first start before starting anyway."""


def data_dir(env: Mapping[str, str]) -> str:
    """Where an XDG-following CLI keeps its data for this environment."""
    return env.get("XDG_DATA_HOME") or env.get("HOME") or ""


class FirstStarts:
    """The data directories a session has opened on, and the first starts under way."""

    def __init__(self, wait: float = FIRST_START_WAIT) -> None:
        self._wait = wait
        self._warm: set[str] = set()
        self._starting: dict[str, anyio.Event] = {}

    @asynccontextmanager
    async def turn(self, key: str, opened: anyio.Event) -> AsyncIterator[None]:
        """Hold the body until `key` is warm or no other first start runs there.

        Inside, this run may be the first start: until `opened` is set (its session opened)
        or the body ends, later runs on `key` wait for it."""
        mine = await self._claim(key)
        if mine is None:
            yield
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch, key, opened, mine)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                self._release(key, mine, warm=opened.is_set())

    async def _claim(self, key: str) -> anyio.Event | None:
        with anyio.move_on_after(self._wait):
            while key not in self._warm:
                other = self._starting.get(key)
                if other is None:
                    mine = self._starting[key] = anyio.Event()
                    return mine
                await other.wait()
        return None

    async def _watch(self, key: str, opened: anyio.Event, mine: anyio.Event) -> None:
        await opened.wait()
        self._release(key, mine, warm=True)

    def _release(self, key: str, mine: anyio.Event, *, warm: bool) -> None:
        if warm:
            self._warm.add(key)
        if self._starting.get(key) is mine:
            del self._starting[key]
        mine.set()
