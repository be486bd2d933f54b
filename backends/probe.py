"""Asking an agent CLI something besides a task (its models, its help, its catalog over RPC):
one short run, bounded, as the user the agents run as, its output collected.

The CLI runs its own code, so it runs as the agents do (an agent user's CLI, one that user
may have replaced, never runs as root), in a fresh directory of its own (an ACP session needs
a directory to open in, and none of a task's must be touched), with the environment its
version probe gets. A question that is a conversation (ACP's handshake, Pi's RPC) is a
`LineParser` that writes its next request as an answer comes; every other question reads
what the CLI prints.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from backends.base import LineParser, ParseStep, RunResult, RunStatus
from backends.process import ProcessSpec, run_process

if TYPE_CHECKING:  # backends.agent_cli imports backends.version, which this must not cycle on
    from backends.agent_cli import AgentCli

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 15.0
"""Seconds a question may take (Multica's bound for `opencode models` and an ACP handshake)."""
MAX_LINES = 20_000
"""Lines of an answer kept: a model catalog is a few thousand at most."""


@dataclass(frozen=True, slots=True)
class Said:
    """What the CLI printed, and how it ended (`exit_code` None: it did not end in time)."""

    lines: tuple[str, ...]
    stderr: str
    exit_code: int | None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


class Lines:
    """A `LineParser` that keeps every line the CLI prints (up to `MAX_LINES`)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def feed(self, line: str) -> ParseStep:
        if len(self.lines) < MAX_LINES:
            self.lines.append(line)
        return ParseStep()

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        return RunResult(RunStatus.COMPLETED if exit_code == 0 else RunStatus.FAILED)


class Conversation(LineParser, Protocol):
    """A question asked over stdin: its first lines, then an answer to each line read (the
    parser closes stdin when it has heard enough)."""

    def opening(self) -> bytes:
        """What is written to stdin as the CLI starts."""
        ...


async def ask(
    cli: AgentCli,
    args: Sequence[str],
    *,
    bound: float = PROBE_TIMEOUT,
    talk: Callable[[Path], Conversation] | None = None,
) -> Said:
    """Run `cli` with `args` (after its launch prefix) until it exits or `bound` passes; what
    it printed. `talk`, given the directory the CLI runs in, makes the conversation that
    reads its stdout (else every line is kept and stdin is closed at once). A CLI that cannot
    start printed nothing and did not end (`exit_code` None)."""
    lines = Lines()
    user = cli.probe_user
    exit_code: int | None = None
    stderr = ""
    folder = Path(tempfile.mkdtemp(prefix="agent-daemon-probe-"))
    try:
        if user is not None:
            os.chown(folder, user.uid, user.gid)
        conversation = talk(folder) if talk is not None else None
        reader: LineParser = conversation if conversation is not None else lines
        spec = ProcessSpec(
            argv=cli.command(*args),
            cwd=folder,
            env=cli.probe_environment(),
            stdin_data=conversation.opening() if conversation is not None else b"",
            keep_stdin_open=conversation is not None,
            kill_grace=1.0,
            result_timeout=1.0,
            user=user,
        )
        with anyio.move_on_after(bound):
            async with run_process(spec, reader) as run:
                async for _ in run.messages():
                    pass
                await run.result()
                exit_code, stderr = run.returncode, run.stderr_tail()
    except OSError as exc:
        log.debug("%s: %s could not run: %s", cli.name, " ".join(args), exc)
    finally:
        # The agent user may have left files in it; removing them is the daemon's to do.
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))
    return Said(tuple(lines.lines), stderr, exit_code)
