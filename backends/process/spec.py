"""How to start one agent process and how hard to stop it: `ProcessSpec`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from backends.base import NullObserver, ReadBeat, RunObserver, RunSpec
from backends.process.identity import AgentUser
from backends.process.lines import MAX_LINE_BYTES
from backends.process.registry import ProcessRegistry
from backends.process.unit import Containment

STDERR_TAIL_BYTES = 8 * 1024


@dataclass(frozen=True)
class ProcessSpec:
    """How to start one agent process and how hard to stop it."""

    argv: Sequence[str]
    cwd: Path
    env: Mapping[str, str]
    stdin_data: bytes = b""
    keep_stdin_open: bool = False
    kill_grace: float = 5.0
    task_id: str = ""
    observer: RunObserver = field(default_factory=NullObserver)
    processes: ProcessRegistry | None = None
    """Where this process and what it starts are recorded; None: a registry of its own."""
    result_timeout: float = 5.0
    max_line_bytes: int = MAX_LINE_BYTES
    stderr_tail_bytes: int = STDERR_TAIL_BYTES
    user: AgentUser | None = None
    """The user the process starts as (None: the daemon's own)."""
    read_beat: ReadBeat | None = None
    """The beat a chatty agent's stdout is read on (`held_reads.py`; None: as it comes)."""
    containment: Containment | None = None
    """Its own pid namespace and cgroups (`unit.py`); None: a plain spawn."""

    @classmethod
    def for_run(
        cls,
        spec: RunSpec,
        argv: Sequence[str],
        env: Mapping[str, str],
        stdin_data: bytes,
        *,
        keep_stdin_open: bool = False,
    ) -> ProcessSpec:
        """The process of one agent run: `argv` in its work directory, under its limits."""
        return cls(
            argv=argv,
            cwd=spec.workdir,
            env=env,
            stdin_data=stdin_data,
            keep_stdin_open=keep_stdin_open,
            kill_grace=spec.kill_grace,
            task_id=spec.task_id,
            observer=spec.observer,
            processes=spec.processes,
            result_timeout=spec.exit_wait,
            user=spec.user,
            read_beat=spec.read_beat,
            containment=spec.containment,
        )
