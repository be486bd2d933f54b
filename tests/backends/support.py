"""Shared by the process and backend tests: an observer, a line parser, transcript replay,
a run drained."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from backends.base import (
    AgentRun,
    LineParser,
    Message,
    MessageType,
    ParseStep,
    RunResult,
    RunSpec,
    RunStatus,
)
from backends.process import ProcIdentity, identify
from daemon.task.activity import Activity
from daemon.testing import FakeClock


@dataclass
class RecordingObserver:
    """Remembers every signal sent and counts invalid lines."""

    signals: list[str] = field(default_factory=list)
    invalid: int = 0
    limits: list[str] = field(default_factory=list)

    def signal_sent(self, signal_name: str) -> None:
        self.signals.append(signal_name)

    def invalid_line(self) -> None:
        self.invalid += 1

    def limit_reached(self, limit: str) -> None:
        self.limits.append(limit)


@dataclass
class LinesParser:
    """Every line becomes a text message; `finish` records what it was given."""

    finished_with: tuple[int | None, str] | None = None

    def feed(self, line: str) -> ParseStep:
        return ParseStep(messages=[Message(MessageType.TEXT, content=line)])

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        self.finished_with = (exit_code, stderr_tail)
        status = RunStatus.COMPLETED if exit_code == 0 else RunStatus.FAILED
        return RunResult(status, error=stderr_tail, exit_code=exit_code)


SLEEPER = "import time; time.sleep(120)"

TREE_CHILD = """
import subprocess, sys, time
inner = (
    "import subprocess, sys, time;"
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']);"
    "print(c.pid, flush=True); time.sleep(120)"
)
grandchild = subprocess.Popen(
    [sys.executable, "-c", inner], start_new_session=True, stdout=subprocess.PIPE
)
print("tree", grandchild.pid, int(grandchild.stdout.readline()), flush=True)
time.sleep(120)
"""
"""A child that starts a grandchild in its own session with a great-grandchild below it,
prints `tree <grandchild pid> <great-grandchild pid>` and sleeps."""

PINGABLE = """
import signal, sys
signal.signal(signal.SIGTERM, lambda *_: (print("term", flush=True), sys.exit(0)))
print("ready", flush=True)
for line in sys.stdin:
    print(line.strip(), flush=True)
"""
"""A child that echoes stdin lines and announces a SIGTERM: if `ping` comes back before any
`term`, no SIGTERM had reached it when the ping was sent."""


def tree_pids(line: str) -> list[int]:
    """The pids of a `tree <pid> <pid>` line."""
    word, *pids = line.split()
    assert word == "tree", line
    return [int(pid) for pid in pids]


def identities(pids: Iterable[int]) -> list[ProcIdentity]:
    """Identities of live pids; a pid already gone makes the caller's setup wrong."""
    pids = list(pids)
    found = [identify(pid) for pid in pids]
    assert all(found), f"not all of {pids} are alive"
    return [f for f in found if f is not None]


def feed_file(parser: LineParser, path: Path) -> list[ParseStep]:
    """Feed a recorded transcript (`*.jsonl`) to `parser` line by line."""
    return [parser.feed(line) for line in path.read_text().splitlines()]


def messages(steps: list[ParseStep]) -> list[Message]:
    """Every message the steps produced, in order."""
    return [m for step in steps for m in step.messages]


def of_type(steps: list[ParseStep], kind: MessageType) -> list[Message]:
    """The messages of one type."""
    return [m for m in messages(steps) if m.type is kind]


def read_meta(path: Path) -> dict[str, Any]:
    """A recorded transcript's `.meta.json`."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def as_transcribed(sent: Iterable[Message]) -> list[Message]:
    """The messages as the drain loop passes them on: through one run's `Activity`, which names
    each tool result after its call."""
    activity = Activity(FakeClock())
    return [activity.observe(m) for m in sent]


def results_named_after_calls(sent: Iterable[Message]) -> list[tuple[str, str]]:
    """(call's tool, result's tool) for every tool result, once transcribed; at least one."""
    transcribed = as_transcribed(sent)
    calls = {m.call_id: m.tool for m in transcribed if m.type is MessageType.TOOL_USE}
    pairs = [
        (calls.get(m.call_id, ""), m.tool) for m in transcribed if m.type is MessageType.TOOL_RESULT
    ]
    assert pairs, "no tool result to name"
    return pairs


async def drain(run: AgentRun, bound: float = 30) -> list[Message]:
    """Every message of `run`, to its end, within `bound` seconds."""
    messages: list[Message] = []
    with anyio.fail_after(bound):
        async for message in run.messages():
            messages.append(message)
    return messages


def stdin_spec(env: dict[str, str], workdir: Path, resume: str = "") -> RunSpec:
    """A run of a CLI given its prompt on stdin, in `workdir` (made if missing)."""
    workdir.mkdir(exist_ok=True)
    return RunSpec(
        prompt="Do the task.", workdir=workdir, env=env, resume_session_id=resume, kill_grace=1.0
    )
