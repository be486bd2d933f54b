"""The hand-off from an agent's stdout reader to the run's consumer: bounded, one wakeup each.

An agent printing a few lines a second hands over one batch per stdout read, and the consumer
is waiting for each. anyio's memory object stream made every such hand-off cost two extra
event-loop round trips (its `send` and its `receive` each yield before acting) and a waiter
object; with 20 agents at 10 lines a second that was a fifth of the daemon's drain work.
`Inbox` yields only when it must wait, or when one side is ahead of the other (a batch put
while the consumer is busy, a batch taken that was already queued), so a fast agent or a long
backlog still lets other tasks run between batches.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

import anyio
from anyio.lowlevel import checkpoint

T = TypeVar("T")


class Inbox(Generic[T]):
    """A bounded queue from one producer to one consumer; each side can close it."""

    def __init__(self, capacity: int) -> None:
        self._items: deque[T] = deque()
        self._capacity = capacity
        self._sending = True
        self._receiving = True
        self._readable: anyio.Event | None = None
        self._writable: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self._items)

    async def put(self, item: T) -> None:
        """Queue `item`, waiting while the inbox is full.

        Raises `anyio.BrokenResourceError` once the consumer has closed its side."""
        while self._receiving and len(self._items) >= self._capacity:
            self._writable = anyio.Event()
            await self._writable.wait()
        if not self._receiving:
            raise anyio.BrokenResourceError
        self._items.append(item)
        if self._readable is not None:
            self._readable.set()
            self._readable = None
        else:
            # Nobody is waiting, so the consumer is behind: let it (and every other task) run
            # before the producer reads more, or a fast agent would hold the event loop until
            # the inbox is full.
            await checkpoint()

    async def get(self) -> T:
        """The oldest item, waiting for one if there is none.

        Raises `anyio.EndOfStream` once the producer has closed and everything was taken, and
        `anyio.ClosedResourceError` once the consumer has closed its own side."""
        if self._items and self._receiving:
            await checkpoint()  # queued already: let other tasks run between batches
        while not self._items or not self._receiving:
            if not self._receiving:
                raise anyio.ClosedResourceError
            if not self._sending:
                raise anyio.EndOfStream
            self._readable = anyio.Event()
            await self._readable.wait()
        item = self._items.popleft()
        if self._writable is not None:
            self._writable.set()
            self._writable = None
        return item

    def close_sender(self) -> None:
        """No more items: the consumer gets what is queued, then `EndOfStream`."""
        self._sending = False
        if self._readable is not None:
            self._readable.set()
            self._readable = None

    def close_receiver(self) -> None:
        """The consumer is gone: what is queued is dropped and a waiting producer is released."""
        self._receiving = False
        self._items.clear()
        if self._writable is not None:
            self._writable.set()
            self._writable = None
        if self._readable is not None:
            self._readable.set()
            self._readable = None
