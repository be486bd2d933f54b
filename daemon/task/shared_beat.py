"""A task's beat, shared by its transcript's flush and its agent's reader.

A chatty agent's stdout is read on the task's transcript beat (backends/process/held_reads.py).
The flush for that beat has to come after that read, or what was read on the beat would wait
a whole beat more; but two tasks waking on the same instant leave their order to the event
loop. So while the reader holds, the flush keeps no time of its own: it waits for the reader
to come back for its next hold — by then everything it read on the beat is queued — and the
reader's call lets it go. A reader that stops holding (`release`) lets it go too — what it read
on the beat leaves now — and the flush keeps its own time again, until the reader's next
`hold()` lets it go at once. A held reader that is not back a whole beat after its beat is
waiting for output that has not come (or its agent ended): the flush goes then, and keeps its
own time.
"""

from __future__ import annotations

import anyio

from daemon.protocol.pacing import Beat


class SharedBeat:
    """When a task's transcript flushes and (as `backends.base.ReadBeat`) when its agent's
    held reads happen: on the same beat, the read first."""

    def __init__(self, beat: Beat) -> None:
        self._beat = beat
        self.reader_holds = False
        """Whether the reader holds on this beat: the flush then waits for it."""
        self._reader_back = anyio.Event()

    def interval(self) -> float:
        """Seconds between two beats (they stretch with the daemon's load: pacing.py)."""
        return self._beat.interval()

    async def hold(self) -> None:
        """The reader's wait for its next beat; the flush waiting for it goes now."""
        self.reader_holds = True
        self._reader_back.set()
        await anyio.sleep(self._beat.wait())

    def release(self) -> None:
        """The reader reads as output comes again: what it read on the beat leaves now, then
        the flush keeps its own time."""
        if self.reader_holds:
            self.reader_holds = False
            self._reader_back.set()

    async def next_flush(self) -> None:
        """The flush's wait: while the reader holds, for its read on the beat; else for the
        beat, or for the reader starting to hold, whichever comes first."""
        holds = self.reader_holds
        # A reader starting to hold may have read lines a beat old already (its read on the
        # beat was cut short and it read the rest right after): they leave now. A holding
        # reader is given the beat after the one it sleeps until: "the next beat at least an
        # interval away" is that same beat when both were reckoned on one instant (a virtual
        # clock, a coarse one), and the flush then gave up on the reader as it woke.
        wait = self._beat.wait()
        if holds:
            wait += self._beat.interval()
        # The event is renewed after the wait, not before: a reader back while the last flush
        # was still sending has its lines sent now, not a beat later.
        with anyio.move_on_after(wait) as late:
            await self._reader_back.wait()
        self._reader_back = anyio.Event()
        if holds and late.cancelled_caught:
            self.reader_holds = False
