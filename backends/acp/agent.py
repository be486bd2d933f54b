"""One ACP agent CLI as a table entry: everything that differs between them is data."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the backend imports this table
    from backends.agent_cli import AgentCli
    from backends.models import Catalog


@dataclass(frozen=True, slots=True)
class AcpAgent:
    """How to start one agent CLI in ACP mode, and what the daemon needs to know of it."""

    name: str
    """The runtime type registered with the server (Multica's name for it)."""
    label: str
    """The name people know it by, for logs and the transcript."""
    command: str
    """The executable looked up on PATH when no path is configured."""
    acp_args: tuple[str, ...]
    """The arguments that put the CLI in ACP mode; configured arguments may not repeat them."""
    min_version: str = ""
    """The oldest version known to speak ACP as this backend expects ("" = any)."""
    provider: str = ""
    """Whose tokens the usage counts (`google`, `openai`, ...); "" = the CLI's own (`name`)."""
    model_flag: str = ""
    """The CLI flag that picks the model; "" = the session's `session/set_model`."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables the CLI needs to run unattended (set over the task's environment)."""
    probe_env: Mapping[str, str] = field(default_factory=dict)
    """Variables that make its `--version` probe cheaper (set for the probe only)."""
    resumes: bool = True
    """Whether a session it offers to resume or load is asked for (False: always fresh)."""
    pending_runs: bool = True
    """A tool call it reports `pending` may already run: it says `in_progress` late or never.
    False only for an agent whose `pending` means what ACP says (input streaming in, or
    awaiting permission), so that a model stalled mid-call is idle, not a tool at work."""
    first_start_alone: bool = False
    """Its first start on a fresh HOME must not overlap another (see `first_start`)."""
    untested: str = ""
    """Why the daemon has never run this CLI ("" = it has: its tests drive the real CLI or
    a recording of it). An untested entry is offered, and says so when detected."""
    effort: bool = False
    """Its session's effort option is the agent's thinking level: offered for the session's
    model in its catalog, and set (`session/set_config_option`) before the prompt."""
    list_models: Callable[[AgentCli], Awaitable[Catalog]] | None = None
    """How its models are read (None: from its ACP `session/new`, `discovery.py`)."""

    def __post_init__(self) -> None:
        if not self.provider:
            object.__setattr__(self, "provider", self.name)
