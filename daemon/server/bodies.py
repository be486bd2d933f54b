"""The request bodies the reference server accepts, as validating pydantic models.

Unknown fields are ignored (a newer daemon may send more); a missing or mistyped required
field is a 400 naming the field, never a 500.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# SQLite's integer range: a larger number is a 400 here, not an overflow inside a query.
_SQL_MIN = -(2**63)
_SQL_MAX = 2**63 - 1


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class EmptyIn(_Body):
    """A body the endpoint does not read (`{}`); still parsed, so garbage is a 400."""


class RuntimeIn(_Body):
    """One runtime a daemon offers in `register`: one per backend found on its machine."""

    type: str = Field(min_length=1)
    name: str = ""
    version: str = ""
    status: str = "online"


class RegisterIn(_Body):
    """`POST /api/daemon/register`; as Multica's DaemonRegister, at least one runtime."""

    workspace_id: str = Field(min_length=1)
    daemon_id: str = Field(min_length=1)
    device_name: str = ""
    cli_version: str = ""
    runtimes: list[RuntimeIn] = Field(min_length=1)


class HeartbeatIn(_Body):
    """`POST /api/daemon/heartbeat`."""

    runtime_id: str = Field(min_length=1)


class ClaimIn(_Body):
    """`POST /api/daemon/tasks/claim`."""

    daemon_id: str = Field(min_length=1)
    runtime_ids: list[str]
    max_tasks: int = Field(ge=0, le=_SQL_MAX)


class DeregisterIn(_Body):
    """`POST /api/daemon/deregister`; as Multica's DaemonDeregister, at least one runtime id."""

    runtime_ids: list[str] = Field(min_length=1)


class ProgressIn(_Body):
    """`POST /api/daemon/tasks/{id}/progress`: where the task is (Multica's
    `TaskProgressRequest`)."""

    summary: str = ""
    step: int = Field(default=0, ge=_SQL_MIN, le=_SQL_MAX)
    total: int = Field(default=0, ge=_SQL_MIN, le=_SQL_MAX)


class MessageIn(_Body):
    """One transcript message; `seq` increases per task and makes re-sends harmless."""

    seq: int = Field(ge=_SQL_MIN, le=_SQL_MAX)
    type: str = Field(min_length=1)
    tool: str | None = None
    content: str | None = None
    input: Any = None
    output: str | None = None


class MessagesIn(_Body):
    """`POST /api/daemon/tasks/{id}/messages`."""

    messages: list[MessageIn]


class UsageEntryIn(_Body):
    """Token usage of one model during a task, as a running total."""

    provider: str = ""
    model: str = ""
    input_tokens: int = Field(default=0, ge=0, le=_SQL_MAX)
    output_tokens: int = Field(default=0, ge=0, le=_SQL_MAX)
    cache_read_tokens: int = Field(default=0, ge=0, le=_SQL_MAX)
    cache_write_tokens: int = Field(default=0, ge=0, le=_SQL_MAX)


class UsageIn(_Body):
    """`POST /api/daemon/tasks/{id}/usage`."""

    usage: list[UsageEntryIn]


class CompleteIn(_Body):
    """`POST /api/daemon/tasks/{id}/complete`."""

    output: str = ""
    session_id: str = ""
    work_dir: str = ""


class SessionIn(_Body):
    """`POST /api/daemon/tasks/{id}/session`: at least one of the two."""

    session_id: str = ""
    work_dir: str = ""


class FailIn(_Body):
    """`POST /api/daemon/tasks/{id}/fail`."""

    error: str = ""
    failure_reason: str = ""
    session_id: str = ""
    work_dir: str = ""


class AgentIn(_Body):
    """The agent a task runs as; every field has a default so `{}` is a valid agent."""

    id: str = "default"
    name: str = "default"
    instructions: str = ""
    custom_env: dict[str, str] = Field(default_factory=dict)
    custom_args: list[str] = Field(default_factory=list)
    model: str = ""
    skills: list[dict[str, Any]] = Field(default_factory=list)
    """Inline skills (`name`, `description`, `content`, `files`), handed on as sent."""


class WorkspaceIn(_Body):
    """`POST /api/workspaces` (reference-server extension): add a workspace."""

    name: str = Field(min_length=1)
    id: str = ""


class RepoIn(_Body):
    """A repository a task may check out, and the ref its checkout starts from ('' = default)."""

    url: str = Field(min_length=1)
    ref: str = ""


class TaskIn(_Body):
    """`POST /api/tasks` (reference-server extension): queue a task."""

    prompt: str = Field(min_length=1)
    backend: str | None = None
    workspace_id: str = "default"
    agent: AgentIn = Field(default_factory=AgentIn)
    prior_session_id: str = ""
    repos: list[RepoIn] = Field(default_factory=list)
    rerun_of: str = ""
    """A finished task to continue: its work dir, and its session unless its failure poisoned
    it (then the rerun starts afresh)."""


class IssueCheckIn(_Body):
    """Body of the batch issue gc-check: at most 500 ids, Multica's cap."""

    issue_ids: list[str] = Field(max_length=500)
