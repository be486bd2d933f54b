"""The backend protocol: what every agent backend takes, emits and returns.

A backend turns a `RunSpec` into a running agent. The daemon only ever sees three things:

* a stream of `Message` objects (the drain loop reads them, the watchdog watches them),
* how many messages are still queued (`AgentRun.pending()` — the watchdog never fires while
  the drain is merely behind),
* a final `RunResult` once the message stream has ended.

Leaving the `async with backend.start(spec)` block — normally, by an error, or because the
watchdog cancelled the enclosing scope — kills the agent's whole process tree. That is the
only place processes are killed; the watchdog never touches a process itself.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # backends.process imports this module
    from backends.process.identity import AgentUser
    from backends.process.registry import ProcessRegistry
    from backends.process.unit import Containment


class MessageType(enum.StrEnum):
    """Kinds of message an agent emits; `result` is internal (the final answer, not sent)."""

    TEXT = "text"
    THINKING = "thinking"
    TOOL_USE = "tool_use"
    TOOL_RESULT = "tool_result"
    STATUS = "status"
    ERROR = "error"
    LOG = "log"
    RESULT = "result"


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model during a run."""

    provider: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Message:
    """One event from an agent in the daemon's own model (what the line protocol prints)."""

    type: MessageType
    content: str = ""
    tool: str = ""
    call_id: str = ""
    input: Mapping[str, Any] | None = None
    output: str = ""
    session_id: str = ""
    is_error: bool = False
    usage: tuple[Usage, ...] = ()
    heartbeat: bool = False
    """A keep-alive the CLI prints while a tool runs: shown on that tool, never activity."""
    unrecognised: str = ""
    """The line this message stands for, when the parser did not recognise it (a CLI whose
    output changed?): until something is recognised, such a line is no sign of life."""
    fresh_process: bool = False
    """The backend has just started another agent process inside the same run (a session it
    could not resume): that process starts from nothing, under the first-output budget."""
    retired_session: str = ""
    """The session the run was to resume and the agent could not: it went on in a fresh one
    (the server is told, so the dead session is never offered again)."""


class RunStatus(enum.StrEnum):
    """How a run ended, as the backend saw it; the daemon adds watchdog and cancel outcomes."""

    COMPLETED = "completed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    IDLE_WATCHDOG = "idle_watchdog"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of one agent run."""

    status: RunStatus
    output: str = ""
    error: str = ""
    session_id: str = ""
    usage: tuple[Usage, ...] = ()
    exit_code: int | None = None
    failure_reason: str = ""
    """Why the run failed, read from the agent's structured output: a Multica taxonomy value,
    or "" when the output does not say (the daemon then reads the error text)."""
    limit_resets: str = ""
    """When a provider limit that failed the run lifts, in the agent's words ("2:05 PM")."""


class RunObserver(Protocol):
    """Hooks through which a run reports what the daemon counts (metrics)."""

    def signal_sent(self, signal_name: str) -> None:
        """A signal (`SIGTERM`, `SIGKILL`) was sent to part of the agent's process tree."""

    def invalid_line(self) -> None:
        """An agent output line could not be parsed and was skipped."""

    def limit_reached(self, limit: str) -> None:
        """The run's cgroup refused it more (`memory`: the OOM killer acted; `pids`: a fork)."""


class NullObserver:
    """An observer that ignores everything (the default)."""

    def signal_sent(self, signal_name: str) -> None:
        """Ignore the signal."""

    def invalid_line(self) -> None:
        """Ignore the line."""

    def limit_reached(self, limit: str) -> None:
        """Ignore the limit."""


class ReadBeat(Protocol):
    """The beat a chatty agent's output may be read on instead of line by line.

    The daemon sends a task's transcript on a beat (every 500 ms); lines read between two
    beats wait for the next one anyway. Reading them all on the beat, the pipe left unread
    meanwhile, wakes the daemon once a beat instead of once a line
    (backends/process/held_reads.py)."""

    def interval(self) -> float:
        """Seconds between two beats."""
        ...

    async def hold(self) -> None:
        """Return on the next beat. Everything read before the call has been handed on."""
        ...

    def release(self) -> None:
        """The reader no longer holds: it reads output as it comes."""
        ...


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything a backend needs to start one agent run."""

    prompt: str
    workdir: Path
    env: Mapping[str, str]
    task_id: str = ""
    model: str = ""
    thinking_level: str = ""
    """The reasoning effort in the CLI's own words ("": the CLI's default); checked against
    the model's catalog before the run, so a backend gives it as it is."""
    service_tier: str = ""
    """The model's service tier (Codex's `priority`; "": the CLI's configuration's)."""
    resume_session_id: str = ""
    instructions: str = ""
    extra_args: Sequence[str] = field(default_factory=tuple)
    kill_grace: float = 5.0
    exit_wait: float = 5.0
    """Seconds to wait for the process to exit once its stdout closed (then it is killed)."""
    observer: RunObserver = field(default_factory=NullObserver)
    processes: ProcessRegistry | None = None
    """Where the run's processes are recorded (the daemon's one registry); None: the run's own."""
    mcp_config: Path | None = None
    """A file of MCP servers the agent uses instead of its own configuration (None: its own)."""
    mcp: Mapping[str, Any] | None = None
    """The same MCP configuration as the task gave it, held in memory from setup on: a backend
    that hands it over in-band (ACP) reads this, never the file, which the agent can replace
    between attempts (a link to a root-only file would be read by root on the retry)."""
    settings_file: Path | None = None
    """A settings file the daemon wrote for this run (Claude Code's `--settings`: the user's
    skills the agent turned off), or None."""
    user: AgentUser | None = None
    """The user every process of the run starts as (None: the daemon's own)."""
    codex_sessions: Path | None = None
    """The user's own Codex sessions folder, which the task's `codex-home/sessions` is the
    daemon's link to (None: no link): read there, never through the link, which the agent
    can replace with one to a folder it could not read itself."""
    read_beat: ReadBeat | None = None
    """The beat a chatty agent's output is read on (None: every line as it comes)."""
    containment: Containment | None = None
    """What makes each of the run's processes a kernel unit (None: a plain spawn)."""


@dataclass(slots=True)
class ParseStep:
    """What one agent output line produced: messages, and lines to write back to its stdin."""

    messages: list[Message] = field(default_factory=list)
    replies: list[bytes] = field(default_factory=list)
    close_stdin: bool = False
    invalid: bool = False


class LineParser(Protocol):
    """Turns an agent's stdout lines into messages and, at exit, into a result."""

    def feed(self, line: str) -> ParseStep:
        """Parse one line (already cleaned of NUL bytes and invalid UTF-8, no newline)."""
        ...

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """Build the run's result once stdout closed and the process exited (or was killed)."""
        ...


class AgentRun(Protocol):
    """A started agent: its messages, its queue depth, its pid and, at the end, its result."""

    @property
    def pid(self) -> int: ...

    def messages(self) -> AsyncIterator[Message]:
        """Yield messages until the agent's stdout closes."""
        ...

    def pending(self) -> int:
        """Messages parsed but not yet taken by the drain loop."""
        ...

    async def close_stdin(self) -> None:
        """Tell the agent no more input is coming (used after its final result)."""
        ...

    async def result(self) -> RunResult:
        """Wait (bounded) for the process to exit and build the result; call after `messages`."""
        ...


class Backend(Protocol):
    """An agent CLI the daemon can run."""

    name: str

    async def detect(self) -> str | None:
        """Return the CLI's version if it is installed and answers, else None (bounded)."""
        ...

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the agent; leaving the context kills its whole process tree."""
        ...
