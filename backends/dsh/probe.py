"""`dsh --profile multica --probe`: whether dsh has Multica's runtime profile, bounded."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from backends.base import ParseStep, RunResult, RunStatus
from backends.json_lines import json_object
from backends.process import ProcessSpec, run_process
from backends.process.identity import AgentUser

PROBE_TIMEOUT = 5.0


class _ProbeFrame:
    """A `LineParser` that looks for the probe frame: v 1, runtime dsh, protocol 1."""

    def __init__(self) -> None:
        self.found = False

    def feed(self, line: str) -> ParseStep:
        frame: dict[str, Any] | None = json_object(line)
        if frame is not None and frame.get("type") == "probe":
            ok = (frame.get("v"), frame.get("runtime"), frame.get("protocol_version"))
            self.found = self.found or ok == (1, "dsh", 1)
        return ParseStep()

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        ok = exit_code == 0 and self.found
        return RunResult(RunStatus.COMPLETED if ok else RunStatus.FAILED)


async def probe(argv: Sequence[str], env: Mapping[str, str], user: AgentUser | None = None) -> bool:
    """Whether `argv` exits 0 within the bound having printed the probe frame."""
    parser = _ProbeFrame()
    with anyio.move_on_after(PROBE_TIMEOUT):
        try:
            spec = ProcessSpec(
                argv=list(argv), cwd=Path(tempfile.gettempdir()), env=env, kill_grace=1.0, user=user
            )
            async with run_process(spec, parser) as run:
                async for _ in run.messages():
                    pass
                result = await run.result()
                return result.status is RunStatus.COMPLETED
        except OSError:
            return False
    return False
