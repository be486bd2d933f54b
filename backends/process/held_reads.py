"""Reading a chatty agent's stdout once a beat instead of once a line.

Every line an agent prints wakes the daemon: the kernel wakes the event loop, the pipe's
transport reads, the reader's task runs. The lines leave for the server on the task's beat
(every 500 ms) anyway. So once an agent prints faster than that, its reader stops the pipe's
transport (`pause_reading`: the pipe leaves the event loop's poll set, the kernel keeps what
the agent writes) and waits for the beat (`ReadBeat.hold`); on it, the transport reads again
and the reader takes everything the agent wrote meanwhile at once. The task's flush for that
beat waits for this read (daemon/task/shared_beat.py), so what it read leaves on that beat.
20 agents printing 10 lines a second cost 218 µs of CPU a line read as they came, 34
held (`python -m tests.benchmarks.bench_held_reads 20 10`, the parse and the tracking walk
included); the whole daemon at that load went from 8.7 % of a core to 3.8
(tests/benchmarks/bench_load.py).

When a read waits for the beat (`HeldReads.due`):
* once the agent has printed for a whole beat (`SUSTAINED`) with no two reads `CHATTY` of a
  beat apart, and then for as long as each read on the beat finds output waiting (it returns
  within `STILL_CHATTY` of a beat): an agent printing a line a second is read as it prints,
  and so is a burst shorter than a beat — Claude Code's start-up lines and a quick answer
  (init, the text, the result within 60 ms), or three quick tool calls (12 lines in 300 ms).
  Held from the second of two close reads, as they were, a one-answer task's result waited
  for a beat and the CLI's exit after it for another: issue → result took 1.0-1.5 s, 0.34 s
  now (tests/benchmarks/bench_answer.py). Reading as output comes whenever a read on the beat
  left the pipe empty was tried too: a steady agent's pipe always is, and 20 agents printing
  10 lines a second cost 2.5 times the CPU a line (50 µs against 20, bench_held_reads);
* never once the run is ending: the agent printed the line that ends its run (its parser
  closes its stdin: Claude Code's `result`) or its stderr closed (it exited); a read waiting
  then reads at once. A last line is read on the beat only when it comes in the middle of a
  stretch of output longer than a beat;
* never once the agent asked the daemon something (a line that needed an answer on stdin):
  its question must not wait for a beat;
* not for `COOL_DOWN` seconds after a read found `FULL_READ` bytes or more: that agent writes
  more than a pipe holds (64 KiB) within a beat, and would block on its writes;
* only on asyncio, whose pipe transport can stop reading; anyio's streams cannot, so the
  transport is reached through anyio's process (as anyio itself does to close its pipes).
  Elsewhere every line is read as it comes.

The agent's activity is stamped when its lines are read: at most a beat late while held. A
task whose watchdog window is too short for that is given no beat (daemon/task/run.py).
"""

from __future__ import annotations

import fcntl
import math
import sys
import termios
from collections.abc import Callable
from typing import Any, Protocol

import anyio

from backends.base import ReadBeat

CHATTY = 0.5
"""Reads closer together than this share of a beat are one stretch of output."""
SUSTAINED = 1.0
"""Beats a stretch of output lasts before its reads wait for the beat."""
STILL_CHATTY = 0.2
"""A read on the beat that returns within this share of a beat found output waiting: the next
read waits for the beat again. One that took longer waited for the agent, which slowed down."""
FULL_READ = 32 * 1024
"""Bytes in one read from which the agent writes too fast to be held (half a default pipe)."""
COOL_DOWN = 5.0
"""Seconds after such a read during which no read waits for the beat."""


class Valve(Protocol):
    """A pipe's read side that can stop reading and start again (asyncio's read transport)."""

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


def unread_bytes(valve: Valve) -> int:
    """Bytes the agent wrote that the pipe still holds (FIONREAD); 0 once it is closed."""
    pipe = valve.get_extra_info("pipe")
    try:
        answer = fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except (AttributeError, OSError, ValueError):
        return 0
    return int.from_bytes(answer, sys.byteorder)


def held_reads(process: Any, beat: ReadBeat | None) -> HeldReads | None:
    """The held reads of an anyio process's stdout on `beat`; None without a beat or off
    asyncio (every line then read as it comes)."""
    if beat is None:
        return None
    valve = stdout_valve(process)
    return None if valve is None else HeldReads(beat, valve)


def stdout_valve(process: Any) -> Valve | None:
    """The read transport of an anyio process's stdout on asyncio; None on another loop."""
    transport = getattr(process, "_transport", None)
    get_pipe = getattr(transport, "get_pipe_transport", None)
    pipe = get_pipe(1) if callable(get_pipe) else None
    if callable(getattr(pipe, "pause_reading", None)) and callable(
        getattr(pipe, "resume_reading", None)
    ):
        return pipe
    return None


class HeldReads:
    """When one agent's next stdout read waits for the beat, its pipe paused meanwhile."""

    def __init__(
        self, beat: ReadBeat, valve: Valve, clock: Callable[[], float] = anyio.current_time
    ) -> None:
        self._beat = beat
        self._valve = valve
        self._clock = clock
        self._last_read = -math.inf
        self._stretch_since = -math.inf
        """When the stretch of output the last read belongs to began (its first read)."""
        self._held = False
        """Whether the last read waited for the beat."""
        self._beat_at = -math.inf
        """When the last held read's beat came."""
        self._cool_until = -math.inf
        self._waiting: anyio.CancelScope | None = None
        """The wait for the beat under way, if any."""
        self.asked = False
        """Set once the agent asked something: its reads never wait again."""
        self.ending = False
        """Set once the run is ending (`end`): no read waits again."""

    def due(self) -> bool:
        """Whether the next read waits for the beat."""
        if self.asked or self.ending or self._clock() < self._cool_until:
            return False
        return self._last_read - self._stretch_since >= self._beat.interval() * SUSTAINED

    def end(self) -> None:
        """The run is ending (its last line was read, or the agent exited): no read waits for
        the beat any more, and one waiting now reads at once."""
        self.ending = True
        if self._waiting is not None:
            self._waiting.cancel()

    async def before_read(self) -> None:
        """Wait for the beat, the pipe unread, if the next read is due to."""
        held, self._held = self._held, self.due()
        if not self._held:
            if held:
                self._beat.release()
            return
        self._valve.pause_reading()
        try:
            with anyio.CancelScope() as self._waiting:
                await self._beat.hold()
        finally:
            self._waiting = None
            self._valve.resume_reading()
        self._beat_at = self._clock()

    def left_in_pipe(self) -> bool:
        """Whether the read on the beat left output in the pipe: the transport had read some
        into its buffer just before the pause (a read it had queued, or output that came
        while the reader parsed), and that was all the read returned. The caller reads the
        rest at once; as a read of its own, after the beat's flush, it would leave a beat
        late."""
        return self._held and unread_bytes(self._valve) > 0

    def read(self, chunk: bytes | None) -> None:
        """A read returned `chunk` of output; None: the output ended, no read holds any more."""
        if chunk is None:
            if self._held:
                self._held = False
                self._beat.release()
            return
        now = self._clock()
        interval = self._beat.interval()
        if self._held:
            # A read on the beat that had to wait for output: the agent slowed down.
            if now - self._beat_at >= interval * STILL_CHATTY:
                self._stretch_since = now
        elif now - self._last_read >= interval * CHATTY:
            self._stretch_since = now
        self._last_read = now
        if len(chunk) >= FULL_READ:
            self._cool_until = now + COOL_DOWN
