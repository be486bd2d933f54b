"""A chatty agent's stdout read once a beat: when a read waits, and that its pipe is left unread
meanwhile (backends/process/held_reads.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from backends.base import Message, MessageType, ParseStep
from backends.process import ProcessRun, ProcessSpec, run_process
from backends.process.held_reads import COOL_DOWN, FULL_READ, HeldReads, stdout_valve, unread_bytes
from daemon.testing import FakeClock, python
from tests.backends.support import LinesParser
from tests.helpers import eventually

BEAT = 0.5


class _Beat:
    """A `ReadBeat` whose beat comes when the test says (`beat.set()`), counting the holds.

    A real process's reads are timed by the event loop's clock: `every` starts long, so reads
    a moment apart are one stretch of output, and `hold_next` shortens it, so the stretch
    read so far lasted a whole beat and the next read waits."""

    def __init__(self, every: float = BEAT) -> None:
        self.every = every
        self.holds = 0
        self.releases = 0
        self.beat = anyio.Event()

    def interval(self) -> float:
        return self.every

    async def hold(self) -> None:
        self.holds += 1
        await self.beat.wait()
        self.beat = anyio.Event()

    def release(self) -> None:
        self.releases += 1

    def hold_next(self) -> None:
        self.every = 1e-6


class _Valve:
    """A pipe's read side that records whether it reads."""

    def __init__(self) -> None:
        self.reading = True
        self.calls: list[str] = []
        self.pipe: Any = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.pipe if name == "pipe" else default

    def pause_reading(self) -> None:
        self.reading = False
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.reading = True
        self.calls.append("resume")


def _held(clock: FakeClock) -> tuple[HeldReads, _Beat, _Valve]:
    beat, valve = _Beat(), _Valve()
    return HeldReads(beat, valve, clock), beat, valve


def _reads(held: HeldReads, clock: FakeClock, *gaps: float, size: int = 100) -> None:
    for gap in gaps:
        clock.advance(gap)
        held.read(b"x" * size)


A_BEAT_OF_OUTPUT = (0.0,) + (BEAT / 5,) * 5
"""Reads a fifth of a beat apart for a whole beat (an agent printing 10 lines a second)."""


def _chatty() -> tuple[FakeClock, HeldReads, _Beat, _Valve]:
    """Held reads of an agent that printed for a whole beat: the next read is held."""
    clock = FakeClock()
    held, beat, valve = _held(clock)
    _reads(held, clock, *A_BEAT_OF_OUTPUT)
    return clock, held, beat, valve


def test_an_agent_printing_a_line_a_second_is_read_as_it_prints() -> None:
    clock = FakeClock()
    held, _, _ = _held(clock)
    _reads(held, clock, 0.0, 1.0, 1.0)
    assert not held.due()
    _reads(held, clock, BEAT * 0.6)  # more than half a beat apart: not chatty yet
    assert not held.due()


def test_a_burst_shorter_than_a_beat_is_read_as_it_comes() -> None:
    """Claude Code's start-up lines, its answer and its result within 60 ms, or three quick
    tool calls within 300 ms: every read as output comes; a stretch of a whole beat holds."""
    clock = FakeClock()
    held, _, _ = _held(clock)
    _reads(held, clock, 0.0, 0.05, 0.01)
    assert not held.due()
    _reads(held, clock, *(0.05,) * 7)  # 0.41 s, no read half a beat after the last
    assert not held.due()
    _reads(held, clock, 0.05, 0.05)  # 0.51 s
    assert held.due()
    _reads(held, clock, BEAT * 0.5, 0.01)  # a pause of half a beat: a new stretch
    assert not held.due()


class _OnTheSpot(_Beat):
    """A beat that comes as soon as it is waited for."""

    async def hold(self) -> None:
        self.holds += 1


@pytest.mark.anyio
async def test_only_a_read_on_the_beat_asks_for_what_the_pipe_still_holds() -> None:
    """After a read on the beat, output still in the pipe is read at once with it; after a
    read as output came, nothing more is asked for."""
    clock, beat, valve = FakeClock(), _OnTheSpot(), _Valve()
    held = HeldReads(beat, valve, clock)
    read_end, write_end = os.pipe()
    valve.pipe = SimpleNamespace(fileno=lambda: read_end)
    try:
        os.write(write_end, b"line\n")
        await held.before_read()  # the first read: as it comes
        assert not held.left_in_pipe()
        _reads(held, clock, *A_BEAT_OF_OUTPUT)
        await held.before_read()  # chatty: on the beat
        assert beat.holds == 1
        assert held.left_in_pipe()
        os.read(read_end, 5)
        assert not held.left_in_pipe()
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.anyio
async def test_reads_close_together_hold_until_a_read_on_the_beat_had_to_wait() -> None:
    """Held, the reads stay held while each finds output waiting on its beat, however late
    the beat came (a busy loop); one that waited for the agent ends the holds."""
    clock, beat = FakeClock(), _OnTheSpot()
    held = HeldReads(beat, _Valve(), clock)
    _reads(held, clock, *A_BEAT_OF_OUTPUT)
    for since in (BEAT, BEAT * 1.5):  # the beat came on time, then half a beat late
        clock.advance(since)
        await held.before_read()
        _reads(held, clock, 0.01)  # the read returned at once: output was waiting
        assert held.due()
    await held.before_read()
    _reads(held, clock, BEAT * 0.3)  # it waited for the agent: it slowed down
    assert not held.due()
    await held.before_read()
    assert (beat.holds, beat.releases) == (3, 1)


def test_an_agent_that_asked_something_is_never_held() -> None:
    _, held, _, _ = _chatty()
    held.asked = True
    assert not held.due()


def test_the_end_of_the_run_holds_no_read_and_ends_a_wait_under_way() -> None:
    _, held, _, _ = _chatty()
    held.end()
    assert not held.due()


def test_a_read_of_half_a_pipe_stops_the_holds_for_the_cool_down() -> None:
    clock, held, _, _ = _chatty()
    _reads(held, clock, 0.01, size=FULL_READ)
    assert not held.due()
    for _ in range(int(COOL_DOWN / 0.1) - 2):  # output goes on, a tenth of a second apart
        _reads(held, clock, 0.1)
        assert not held.due()
    _reads(held, clock, 0.1, 0.1, 0.1)
    assert held.due()


@asynccontextmanager
async def _holding(held: HeldReads, beat: _Beat) -> AsyncIterator[anyio.CancelScope]:
    """A read waiting for the beat in a task of its own, while the body runs; the body may
    cancel it (the scope it is given), else the read waits until the beat comes."""
    holds = beat.holds
    async with anyio.create_task_group() as tg:
        tg.start_soon(held.before_read)
        await eventually(lambda: beat.holds == holds + 1)
        yield tg.cancel_scope


@pytest.mark.anyio
async def test_the_pipe_is_paused_while_held_and_reads_again_when_cancelled() -> None:
    _, held, beat, valve = _chatty()
    async with _holding(held, beat) as read:
        assert not valve.reading
        read.cancel()
    assert valve.calls == ["pause", "resume"]
    assert valve.reading


@pytest.mark.anyio
async def test_a_read_waiting_for_the_beat_reads_at_once_when_the_run_ends() -> None:
    _, held, beat, valve = _chatty()
    async with _holding(held, beat):
        held.end()  # the beat never comes: the wait ends all the same
    assert valve.calls == ["pause", "resume"]
    await held.before_read()
    assert beat.holds == 1


@pytest.mark.anyio
async def test_the_beat_hears_when_the_reads_stop_holding_and_when_the_output_ends() -> None:
    """So that the flush it holds back for the reader keeps its own time again."""
    clock, held, beat, _ = _chatty()
    async with _holding(held, beat):
        beat.beat.set()
    _reads(held, clock, BEAT)  # the read on the beat had to wait for output
    await held.before_read()
    assert (beat.holds, beat.releases) == (1, 1)
    await held.before_read()  # not held before either: nothing to release
    held.read(None)  # the output ended
    assert beat.releases == 1
    _reads(held, clock, *A_BEAT_OF_OUTPUT)
    async with _holding(held, beat):
        beat.beat.set()
    held.read(None)  # the output ended
    assert beat.releases == 2


# Two lines, each once the test says so, then 100 KiB at once and a last line. Unread, a
# pipe takes 64 KiB: the big write blocks until the reader reads. A transport still reading
# while its reader waits would take it all into its buffer (up to 128 KiB) and the write would
# go through.
CHATTY_THEN_BIG = """
    import sys
    for i in range(2):
        print(f"line {i}", flush=True)
        sys.stdin.readline()
    sys.stdout.write("x" * 100_000 + "\\n")
    sys.stdout.flush()
    print("after", flush=True)
"""


def _agent(code: str, cwd: Path, beat: _Beat) -> ProcessSpec:
    """A Python agent reading its stdin, its reads held on `beat`."""
    return ProcessSpec(argv=python(code), cwd=cwd, env={}, keep_stdin_open=True, read_beat=beat)


def _blocked_writing_a_pipe(pid: int) -> bool:
    return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()


async def _two_lines_then_hold(
    run: ProcessRun, beat: _Beat
) -> tuple[AsyncIterator[Message], list[str]]:
    """The agent's first line, `go`, its second line; the next read is to be held."""
    messages = aiter(run.messages())
    seen = [(await anext(messages)).content]
    await run.write_line(b"go")
    seen.append((await anext(messages)).content)
    beat.hold_next()
    return messages, seen


async def _drain_into(messages: AsyncIterator[Message], seen: list[str]) -> None:
    """Every further message's content, to the end of the run."""
    seen.extend([message.content async for message in messages])


@pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux only")
@pytest.mark.anyio
async def test_a_held_agents_pipe_is_left_unread_until_the_beat(tmp_path: Path) -> None:
    """The agent blocks on a full pipe while the reader holds, and the beat's read takes what
    waited in one go; after that big read no read is held."""
    beat = _Beat(every=60.0)
    spec = _agent(CHATTY_THEN_BIG, tmp_path, beat)
    with anyio.fail_after(30):
        async with run_process(spec, LinesParser()) as run:
            messages, seen = await _two_lines_then_hold(run, beat)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_into, messages, seen)
                await eventually(lambda: beat.holds == 1, within=10)
                # Only now: output already in the pipe is read at once, never held.
                await run.write_line(b"go")
                await eventually(lambda: _blocked_writing_a_pipe(run.pid), within=10)
                assert run.pending() == 0
                beat.beat.set()
            result = await run.result()
    assert seen == ["line 0", "line 1", "x" * 100_000, "after"]
    assert beat.holds == 1  # the beat's read found more than half a pipe: no more holds
    assert result.exit_code == 0


# A line each time the test writes to stdin, a marker file touched after each.
LINE_EACH_GO = """
    import pathlib, sys
    for i in range(4):
        print(f"line {i}", flush=True)
        pathlib.Path(f"printed-{i}").touch()
        sys.stdin.readline()
"""


@pytest.mark.anyio
async def test_the_read_on_the_beat_takes_the_pipe_too_when_the_transport_had_read_some(
    tmp_path: Path,
) -> None:
    """Output the transport took in just before the pause is all a read on the beat would
    return; the pipe's output behind it must come in the same read, or it leaves for the
    server after the beat's flush, a beat late."""
    beat = _Beat(every=60.0)
    spec = _agent(LINE_EACH_GO, tmp_path, beat)
    with anyio.fail_after(30):
        async with run_process(spec, LinesParser()) as run:
            messages = aiter(run.messages())
            for i in range(2):
                assert (await anext(messages)).content == f"line {i}"
                await run.write_line(b"go")
            beat.hold_next()
            # "line 2" comes while no read waits: the transport takes it into its buffer.
            valve = stdout_valve(run._process)
            assert valve is not None
            await eventually(lambda: (tmp_path / "printed-2").exists(), within=10)
            await eventually(lambda: unread_bytes(valve) == 0, within=10)
            async with anyio.create_task_group() as tg:
                read: list[str] = []

                async def consume() -> None:
                    read.append((await anext(messages)).content)

                tg.start_soon(consume)
                await eventually(lambda: beat.holds == 1, within=10)
                await run.write_line(b"go")  # "line 3" stays in the paused pipe
                await eventually(lambda: (tmp_path / "printed-3").exists(), within=10)
                beat.beat.set()
            assert read == ["line 2"]
            assert run.pending() == 1  # "line 3" came in the same read
            assert (await anext(messages)).content == "line 3"
            await run.write_line(b"go")
            assert (await run.result()).exit_code == 0


# Two lines, each once the test says so, then a last one, and the agent exits.
EXITS_ON_GO = """
    import sys
    for i in range(2):
        print(f"line {i}", flush=True)
        sys.stdin.readline()
    print("last", flush=True)
"""


@pytest.mark.anyio
async def test_a_held_agent_that_exits_is_read_at_once(tmp_path: Path) -> None:
    """A read waiting for the beat when the agent exits reads its last line and the end of
    its output at once: the end of a run never waits for a beat."""
    beat = _Beat(every=60.0)
    spec = _agent(EXITS_ON_GO, tmp_path, beat)
    with anyio.fail_after(30):
        async with run_process(spec, LinesParser()) as run:
            messages, seen = await _two_lines_then_hold(run, beat)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_into, messages, seen)
                await eventually(lambda: beat.holds == 1, within=10)
                await run.write_line(b"go")  # it prints its last line and exits
            result = await run.result()
    assert seen == ["line 0", "line 1", "last"]
    assert not beat.beat.is_set()  # the beat never came
    assert result.exit_code == 0


class _EndsOnEnd(LinesParser):
    """Every line a text message; `END` ends the run (its stdin is closed), as Claude Code's
    `result` does."""

    def feed(self, line: str) -> ParseStep:
        message = Message(MessageType.TEXT, content=line)
        return ParseStep(messages=[message], close_stdin=line == "END")


# A line, then once the test says so its run's last line; it waits for its stdin to close,
# then, told so by a file, exits.
ENDS_THEN_WAITS = """
    import pathlib, sys, time
    print("line 0", flush=True)
    sys.stdin.readline()
    print("END", flush=True)
    sys.stdin.read()
    pathlib.Path("stdin-closed").touch()
    while not pathlib.Path("exit").exists():
        time.sleep(0.01)
"""


@pytest.mark.anyio
async def test_the_line_that_ends_the_run_ends_the_holds(tmp_path: Path) -> None:
    """Once the parser reads the run's last line (and closes the agent's stdin) no read waits
    for the beat: the agent's exit is read as it comes, not on the next beat."""
    beat = _Beat(every=60.0)
    spec = _agent(ENDS_THEN_WAITS, tmp_path, beat)
    with anyio.fail_after(30):
        async with run_process(spec, _EndsOnEnd()) as run:
            messages, seen = await _two_lines_then_hold(
                run, beat
            )  # two reads: were the run not ending, the next would wait
            await eventually(lambda: (tmp_path / "stdin-closed").exists(), within=10)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_drain_into, messages, seen)
                await anyio.wait_all_tasks_blocked()  # its read waits for output, alive
                (tmp_path / "exit").touch()
            result = await run.result()
    assert seen == ["line 0", "END"]
    assert beat.holds == 0
    assert result.exit_code == 0
