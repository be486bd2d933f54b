"""The daemon's CPU per agent output line: read as it comes, or held for the beat.

Run from the repo root: `python -m tests.benchmarks.bench_held_reads [agents] [lines/s]
[seconds]` (default 20 agents, 10 lines a second each, a 10 s window). Starts `agents` children
that each print a stream-json-sized line `lines/s` times a second on their own schedule, and
reads them through `run_process` as a task's agent is read, two ways, one after the other:

- as it comes: every line wakes the reader (no `read_beat`);
- held: reads wait for a shared 500 ms beat once an agent prints faster than it
  (backends/process/held_reads.py, `daemon.task.shared_beat.SharedBeat` on the transcript's
  beat).

Prints this process's CPU per line and as a share of a core. The machine's load moves every
figure: compare the lines of one run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backends.base import ReadBeat
from backends.process import ProcessRegistry, ProcessSpec, run_process
from daemon.protocol.pacing import TRANSCRIPT_BEAT
from daemon.task.shared_beat import SharedBeat
from daemon.testing import python
from tests.backends.support import LinesParser

AGENT = """
    import random, sys, time
    rate, lines = {rate}, {lines}
    start = time.monotonic() + random.random()
    line = '{{"type":"assistant","message":{{"content":[{{"type":"text","text":"%d"}}]}}}}\\n'
    for n in range(1, lines + 1):
        time.sleep(max(0.0, start + n / rate - time.monotonic()))
        sys.stdout.write(line % n)
        sys.stdout.flush()
"""


class _CountedBeat(SharedBeat):
    """The transcript's beat, counting the reads held for it."""

    holds = 0

    async def hold(self) -> None:
        _CountedBeat.holds += 1
        await super().hold()


def _warm_up(agents: int) -> float:
    """Seconds until every agent prints at its pace (a Python start each, 2 cores)."""
    return 2.0 + agents / 40


async def _measure(agents: int, rate: float, window: float, held: bool) -> tuple[float, int, int]:
    """CPU seconds, lines read and reads held over `window`, every agent read as the daemon
    reads it."""
    lines = 0
    warm_up = _warm_up(agents)
    registry = ProcessRegistry()  # one for all, as the daemon's
    # Each agent prints past the window, then exits: its run ends as an agent's does.
    argv = python(AGENT.format(rate=rate, lines=int(rate * (warm_up + window + 2.0))))

    async def read(beat: ReadBeat | None) -> None:
        nonlocal lines
        spec = ProcessSpec(argv, Path.cwd(), {}, processes=registry, read_beat=beat)
        async with run_process(spec, LinesParser()) as run:
            async for _ in run.messages():
                lines += 1
            await run.result()

    async with anyio.create_task_group() as tg:
        for _ in range(agents):
            tg.start_soon(read, _CountedBeat(TRANSCRIPT_BEAT) if held else None)
        await anyio.sleep(warm_up)
        lines, holds, began = 0, _CountedBeat.holds, time.process_time()
        await anyio.sleep(window)
        cpu, counted = time.process_time() - began, lines
        holds = _CountedBeat.holds - holds
    return cpu, counted, holds


def main() -> None:
    agents = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rate = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    window = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    for name, held in (("as it comes", False), ("held for the beat", True)):
        cpu, lines, holds = anyio.run(_measure, agents, rate, window, held)
        print(
            f"{agents} agents x {rate:g} lines/s, {name}: {cpu / max(lines, 1) * 1e6:.0f} µs "
            f"CPU a line over {lines} lines ({holds} reads held), "
            f"{cpu / window * 100:.2f} % of a core"
        )


if __name__ == "__main__":
    main()
