"""What every task run shares with the worker: built once by the worker, handed to each run.

A run, its attempts and its reporter take the task, its backend and its slot, and find every
other collaborator here, typed, in one place — never in a long argument list or a context
variable a caller must have set.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from backends.process import ProcessRegistry
from backends.process.unit import Containment
from daemon.boundary.pool import AgentPool
from daemon.catalogs import ModelCatalogs
from daemon.config import Settings
from daemon.ops.metrics import Metrics
from daemon.protocol.api import TaskServer
from daemon.protocol.pacing import Pacing
from daemon.protocol.retry import RetryPolicy
from daemon.shutdown import ShutdownBudget
from daemon.state.agent_records import AgentRecords
from daemon.state.incidents import IncidentLog
from daemon.state.outbox import Outbox
from daemon.task.localdir.locks import DirectoryLocks
from daemon.task.progress import Progress
from daemon.task.setup.skill_cache import SkillBundleCache
from daemon.workdirs.leases import DirLeases
from daemon.workdirs.service import Workdirs

PREPARE_LEASE_EVERY = 15.0
"""Seconds between a task's prepare-lease renewals (Multica's; its lease lasts 45 s)."""


@dataclass(frozen=True, slots=True)
class AgentReach:
    """How an agent reaches the daemon and its server: what every task's environment adds."""

    server_url: str
    base_env: Mapping[str, str]
    """The environment the daemon started with, of which an agent gets only what it needs."""
    health_port: int = 0
    """The health port's bound port (0 until it is served): agents reach the daemon there."""
    multica_bin: Path | None = None
    """The `multica` executable when one is installed: its directory goes first on PATH."""

    @classmethod
    def found(cls, server_url: str, base_env: Mapping[str, str]) -> AgentReach:
        """The reach of agents started from `base_env`, with the `multica` CLI on its PATH."""
        found = shutil.which("multica", path=base_env.get("PATH") or None)
        return cls(server_url, base_env, multica_bin=Path(found) if found else None)


@dataclass(frozen=True, slots=True)
class Services:
    """The collaborators of every task run: the server, the state stores, the daemon's limits."""

    client: TaskServer
    settings: Settings
    metrics: Metrics
    outbox: Outbox
    incidents: IncidentLog
    budget: ShutdownBudget
    """The one shutdown budget: how long a report or a flush may still take while stopping."""
    idle_retry: RetryPolicy
    """How often, and after which pauses, a run the watchdog stopped is tried again."""
    reach: AgentReach
    records: AgentRecords | None = None
    """Where each running agent is recorded for crash recovery (None: not recorded)."""
    processes: ProcessRegistry = field(default_factory=ProcessRegistry)
    """Every agent process the daemon started, so none is lost as an orphan."""
    pacing: Pacing = field(default_factory=Pacing)
    leases: DirLeases = field(default_factory=DirLeases)
    """The task directories runs hold, which the GC leaves alone."""
    skill_cache: SkillBundleCache | None = None
    """Skill bundles kept between tasks (None: each is fetched every time)."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds: the clock a run's activity and duration are measured by."""
    agent_users: AgentPool | None = None
    """The users agents run as, one per running task with a pool (empty: the daemon's own);
    left out, the one pool of `settings.agent_pool`."""
    containment: Containment | None = None
    """What makes each run a kernel unit here (boundary/containment.py; None: a plain spawn)."""
    workdirs: Workdirs | None = None
    """Repository caches and checkouts: while a task's agent runs, its token may ask for them
    (None: no checkouts)."""
    prepare_lease_every: float = PREPARE_LEASE_EVERY
    """Seconds between renewals of a claimed task's lease while its setup runs."""
    daemon_id: str = ""
    """The id this daemon registered under: a project's local directory bound to it is
    worked in ("": none is)."""
    folders: DirectoryLocks = field(default_factory=DirectoryLocks)
    """Which local directories running tasks hold, and who waits for them."""
    progress: Progress | None = None
    """Where a run's progress posts go (None: none are sent)."""
    catalogs: ModelCatalogs = field(default_factory=ModelCatalogs)
    """Each CLI's model catalog, which a task's thinking level and service tier must fit."""

    def __post_init__(self) -> None:
        if self.agent_users is None:
            # One pool for all runs: each run's own would sweep a user another run still has.
            object.__setattr__(self, "agent_users", AgentPool(self.settings.agent_pool))

    @property
    def users(self) -> AgentPool:
        """The pool of agent users (always there after construction)."""
        assert self.agent_users is not None
        return self.agent_users
