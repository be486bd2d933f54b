"""What the daemon publishes for operations: frozen pictures of itself and its running tasks.

Each long-lived object reports on itself (`snapshot()`): the activity of a run, its watchdog,
its attempt, the run, the worker. The health port, the health document and systemd's status
line read only these values, never the worker or a task's run, so operations depend on the
core through plain values and the core never imports operations' view of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ToolSnapshot:
    """One tool call in flight."""

    name: str
    call_id: str
    running_for: float


@dataclass(frozen=True, slots=True)
class ActivitySnapshot:
    """What the drain loop last heard from a run's agent."""

    idle_seconds: float
    tools_in_flight: tuple[ToolSnapshot, ...]
    messages: int


@dataclass(frozen=True, slots=True)
class WatchdogSnapshot:
    """The watchdog window that applies now ("" and 0: nothing can fire)."""

    scope: str = ""
    threshold_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class AttemptSnapshot:
    """The agent process of a run's current attempt (the last one's between attempts)."""

    pid: int | None = None
    watchdog: WatchdogSnapshot = field(default_factory=WatchdogSnapshot)


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """One running task as operations see it (no token, no prompt)."""

    id: str
    backend: str
    started_wall: float
    retry: int
    """Watchdog retries so far."""
    attempt: AttemptSnapshot
    activity: ActivitySnapshot
    state: str = "running"
    """`starting` (no agent yet), `running`, `in a tool`, `retrying` (waiting for the next
    attempt after a watchdog kill)."""
    resumes: int = 0
    """Retries that resumed the agent's session (the rest started afresh)."""
    transcript_lag: float = 0.0
    """Seconds the oldest message the server has not taken yet has waited (0: none waits)."""


@dataclass(frozen=True, slots=True)
class FinishedSnapshot:
    """One task that has ended, as operations see it (no error text: it may name paths)."""

    id: str
    backend: str
    status: str
    reason: str
    """The failure reason sent to the server ("" when it did not fail)."""
    started_wall: float
    ended_wall: float
    attempts: int
    resumes: int
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class DiskSnapshot:
    """The workspaces root as the last GC round measured it."""

    measured_at: str
    task_dirs: int
    task_bytes: int
    artifact_bytes: int
    repo_caches: int
    repo_cache_bytes: int


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    """One backend's last provider failure (rate limit, quota, auth, outage)."""

    backend: str
    reason: str
    at: str
    """When the task failed (UTC, ISO 8601)."""
    resets: str = ""
    """When the limit lifts, in the agent's words ("" when it did not say)."""
    task_id: str = ""


@dataclass(frozen=True, slots=True)
class DaemonSnapshot:
    """The daemon at one moment: its state, its registration and its running tasks."""

    status: str
    daemon_id: str
    device_name: str
    server_url: str
    registered: bool
    max_concurrent_tasks: int
    agents: tuple[tuple[str, str], ...]
    """(backend name, version) of each backend found."""
    workspaces: tuple[tuple[str, str, tuple[str, ...]], ...]
    """(id, name, runtime ids) of each workspace served (no runtime ids: its register failed)."""
    profile: str
    """The Multica CLI profile the daemon runs under ('' = the default one)."""
    server_circuit: str
    outbox_depth: int
    runs: tuple[RunSnapshot, ...]
    provider_failures: tuple[ProviderFailure, ...] = ()
    disk: DiskSnapshot | None = None
    """The workspaces root at the last GC round (None before one, or with GC off)."""
    finished: tuple[FinishedSnapshot, ...] = ()
    """The last tasks that ended, oldest first."""
    agents_as_root: bool = False
    """Agents run as root (a root daemon without MULTICA_AGENT_USER): they can read its token."""
    containment: str = ""
    """What makes each run a unit here (`pid namespace + cgroup v2 (kill)`, `uid sweep`)."""
    held_back_users: tuple[str, ...] = ()
    """Agent users no task may have now, each with why (processes outlived its sweep)."""
