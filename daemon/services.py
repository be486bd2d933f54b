"""What every task run shares with the worker: built once by the worker, handed to each run.

A run, its attempts and its reporter take the task, its backend and its slot, and find every
other collaborator here, typed, in one place — never in a long argument list or a context
variable a caller must have set.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from backends.process import ProcessRegistry
from daemon.config import Settings
from daemon.ops.metrics import Metrics
from daemon.protocol.api import TaskServer
from daemon.protocol.retry import RetryPolicy
from daemon.shutdown import ShutdownBudget
from daemon.state.agent_records import AgentRecords
from daemon.state.outbox import Outbox
from daemon.task.incidents import IncidentLog
from daemon.task.pacing import Pacing
from daemon.task.setup.spec import AgentReach


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
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds: the clock a run's activity and duration are measured by."""
