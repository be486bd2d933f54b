"""Ask an agent CLI for its version, bounded, through the process helper."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus
from backends.process import ProcessSpec, run_process
from backends.process.identity import AgentUser

VERSION_TIMEOUT = 10.0
_VERSION = re.compile(r"\d+(?:\.\d+)+\S*")
_RELEASE = re.compile(r"\d+(?:\.\d+)*")
_SEMVER = re.compile(r"v?\d+\.\d+\.\d+")


class _VersionLine:
    """A `LineParser` that keeps the CLI's version line, as Multica's daemon picks it
    (`extractVersionLine`): the first line with an `x.y.z` in it (a shell may print noise
    first), else the first non-blank line; with nothing on stdout (Pi prints its version on
    stderr), the first line of stderr that holds a version."""

    def __init__(self) -> None:
        self.line = ""
        self.first = ""

    def feed(self, line: str) -> ParseStep:
        text = line.strip()
        if not text or self.line:
            return ParseStep()
        self.first = self.first or text
        if _SEMVER.search(text):
            self.line = text
            return ParseStep(messages=[Message(MessageType.LOG, content=text)])
        return ParseStep()

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        line = self.line or self.first
        if not line:
            said = [text.strip() for text in stderr_tail.splitlines() if text.strip()]
            line = said[0] if said and _VERSION.search(said[0]) else ""
        ok = exit_code == 0 and bool(line)
        return RunResult(RunStatus.COMPLETED if ok else RunStatus.FAILED, output=line)


def parse_version(line: str) -> str:
    """`2.1.328 (Claude Code)` → `2.1.328`, `codex-cli 0.169.0` → `0.169.0`; else the line."""
    match = _VERSION.search(line)
    return match.group(0) if match else line.strip()


def version_at_least(found: str, needed: str) -> bool:
    """Whether version `found` is `needed` or newer, by numeric release parts (`1.18.2` <
    `1.18.10`); a pre-release suffix counts as its release, and an unreadable version passes."""
    have, want = _release(parse_version(found)), _release(needed)
    if not have or not want:
        return True
    width = max(len(have), len(want))
    return have + (0,) * (width - len(have)) >= want + (0,) * (width - len(want))


def _release(version: str) -> tuple[int, ...]:
    match = _RELEASE.match(version.strip().lstrip("v"))
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


async def cli_version(
    argv: Sequence[str],
    env: Mapping[str, str],
    bound: float = VERSION_TIMEOUT,
    user: AgentUser | None = None,
    refused: list[OSError] | None = None,
) -> str | None:
    """Run `argv` (e.g. `claude --version`); its version line as the CLI prints it (`2.1.328
    (Claude Code)`, what Multica shows beside the device), or None if it fails or hangs.
    `refused` gets the error of a CLI the system would not start (not a program: ENOEXEC)."""
    parser = _VersionLine()
    result: RunResult | None = None
    with anyio.move_on_after(bound):
        try:
            spec = ProcessSpec(
                argv=list(argv),
                cwd=Path(tempfile.gettempdir()),
                env=env,
                kill_grace=1.0,
                user=user,
            )
            async with run_process(spec, parser) as run:
                async for _ in run.messages():
                    pass
                result = await run.result()
        except OSError as exc:
            if refused is not None:
                refused.append(exc)
            return None
    if result is None or result.status is not RunStatus.COMPLETED:
        return None
    return result.output
