"""A real `python -m daemon run` child that tells its health port, and the CLI run to its end."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from daemon.testing import ROOT_AGENTS_ACCEPTED

ROOT = Path(__file__).resolve().parents[1]
_LISTENING = re.compile(r"health port listening on http://(\S+):(\d+)")


@dataclass
class DaemonChild:
    """The child, its stderr so far, and the health port it logged."""

    process: Process
    lines: list[str] = field(default_factory=list)
    health_url: str = ""

    @property
    def log(self) -> str:
        """Everything the daemon wrote to stderr so far."""
        return "\n".join(self.lines)

    async def stop(self, within: float = 20.0) -> int:
        """SIGTERM, then wait for the exit code; SIGKILL and fail the test after `within`."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(within):
            return await self.process.wait()
        self.process.kill()
        raise AssertionError(f"the daemon did not stop within {within}s:\n{self.log}")


async def run_cli(*args: str, env: Mapping[str, str], within: float = 30.0) -> tuple[int, str, str]:
    """Run `python -m daemon ARGS` to its end; returns (exit code, stdout, stderr)."""
    with anyio.fail_after(within):
        done = await anyio.run_process(
            [sys.executable, "-m", "daemon", *args],
            env={**ROOT_AGENTS_ACCEPTED, **env},
            cwd=ROOT,
            check=False,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@asynccontextmanager
async def daemon_child(
    env: Mapping[str, str], within: float = 30.0, python: Sequence[str] = ()
) -> AsyncIterator[DaemonChild]:
    """Start `python -m daemon run` with `env`; yields once its health port listens.

    `python` is the command that runs Python (default: this one), e.g. through `setpriv`.
    Stops it with SIGTERM on exit (and kills it if it does not stop in time).
    """
    process = await anyio.open_process(
        [*(python or (sys.executable,)), "-m", "daemon", "run"],
        env={**ROOT_AGENTS_ACCEPTED, **env},
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    child = DaemonChild(process)
    listening = anyio.Event()

    async def read_stderr() -> None:
        assert process.stderr is not None
        pending = ""
        async for chunk in TextReceiveStream(process.stderr):
            pending += chunk
            *complete, pending = pending.split("\n")
            for line in complete:
                child.lines.append(line)
                found = _LISTENING.search(line)
                if found and not child.health_url:
                    child.health_url = f"http://{found.group(1)}:{found.group(2)}"
                    listening.set()
        listening.set()  # stderr closed: the daemon exited

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stderr)
            with anyio.fail_after(within):
                await listening.wait()
            if not child.health_url:
                raise AssertionError(
                    f"the daemon exited before serving its health port:\n{child.log}"
                )
            try:
                yield child
            finally:
                with anyio.CancelScope(shield=True):
                    await child.stop()
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.aclose()
