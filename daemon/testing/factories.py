"""The task core's objects built for a test, with test-friendly defaults.

Tests construct `Services`, `TaskRun`, `Retries`, `Reporter`, `Transcript` and `Worker` only
through these functions, so a change to a constructor is made here once, not in every test.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

from backends.base import Backend, RunSpec
from daemon.config import Settings
from daemon.ops.metrics import Metrics
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.client import ServerClient
from daemon.protocol.models import Task
from daemon.protocol.retry import RetryPolicy
from daemon.services import AgentReach, Services
from daemon.shutdown import ShutdownBudget
from daemon.state.incidents import IncidentLog
from daemon.state.outbox import Outbox
from daemon.task.activity import Activity
from daemon.task.incidents import TaskIncidents
from daemon.task.recovery import idle_retry_policy
from daemon.task.reporter import Reporter
from daemon.task.retries import Retries
from daemon.task.run import TaskRun
from daemon.task.transcript import Transcript
from daemon.testing.server import FakeTaskServer
from daemon.worker.worker import Worker

SERVER_URL = "http://fake-server.test"
"""The server URL the settings name; nothing listens there: the fake answers in memory."""
AGENT_ENV = {"LC_ALL": "C.UTF-8"}
"""The environment an agent gets in a test: nothing of the test process's own."""


ROOT_AGENTS_ACCEPTED = {"MULTICA_AGENT_ALLOW_ROOT": "1"}
"""What a test daemon is given: CI runs as root against fake servers on loopback, where agents
as root are what the test means; a test of the refusal overrides it."""


def fast_env(home: Path, server_url: str = SERVER_URL, token: str = "test-token") -> dict[str, str]:
    """A daemon environment rooted in `home` with fast windows; each test overrides what it is
    about (the caller adds PATH when agents need it)."""
    return {
        "HOME": str(home),
        "MULTICA_SERVER_URL": server_url,
        "MULTICA_DAEMON_TOKEN": token,
        "MULTICA_DAEMON_STATE_DIR": str(home / "state"),
        "MULTICA_WORKSPACES_ROOT": str(home / "workspaces"),
        "MULTICA_DAEMON_POLL_INTERVAL": "100ms",
        "MULTICA_DAEMON_HEARTBEAT_INTERVAL": "1s",
        "MULTICA_DAEMON_STATUS_POLL_INTERVAL": "200ms",
        "MULTICA_DAEMON_SHUTDOWN_GRACE": "5s",
        "MULTICA_DAEMON_HEALTH_ADDR": "127.0.0.1:0",
        "MULTICA_AGENT_KILL_GRACE": "1s",
        "MULTICA_SCRIPTED_BACKEND": "1",
        "MULTICA_CLAUDE_PATH": str(home / "no-claude"),
        "MULTICA_CODEX_PATH": str(home / "no-codex"),
        "MULTICA_OPENCODE_PATH": str(home / "no-opencode"),
        "MULTICA_GEMINI_PATH": str(home / "no-gemini"),
        "MULTICA_HERMES_PATH": str(home / "no-hermes"),
        **ROOT_AGENTS_ACCEPTED,
    }


def settings_in(home: Path, **env: str) -> Settings:
    """Settings from `fast_env(home)` plus `env`."""
    return Settings.from_env({**fast_env(home), **env})


def task(prompt: str = "", **fields: object) -> Task:
    """A claimed task with a fresh id in workspace `ws-1` and a task-scoped token; `fields`
    override any field."""
    values: dict[str, object] = {
        # Unique across processes: a run's sweep kills every process tagged with its task id,
        # so two test processes handing out the same ids would kill each other's agents.
        "id": str(uuid.uuid4()),
        "workspace_id": "ws-1",
        "auth_token": "mat_test-task-token",
        "prompt": prompt,
        **fields,
    }
    return Task.model_validate(values)


def run_spec(task: Task, work_dir: Path, settings: Settings) -> RunSpec:
    """The spec of a task's agent in `work_dir`, as the run would give it (no brief, no skills)."""
    return RunSpec(
        prompt=task.prompt,
        workdir=work_dir,
        env=AGENT_ENV,
        task_id=task.id,
        resume_session_id=task.prior_session_id,
        kill_grace=settings.kill_grace,
    )


def services(
    settings: Settings,
    server: FakeTaskServer,
    *,
    metrics: Metrics | None = None,
    budget: ShutdownBudget | None = None,
    retry: RetryPolicy | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Services:
    """What the task runs share, on `server`, with the outbox and incidents in the state
    directory; agent records are not kept."""
    metrics = metrics or Metrics()
    return Services(
        client=server,
        settings=settings,
        metrics=metrics,
        outbox=Outbox(settings.state_dir / "outbox", metrics),
        incidents=IncidentLog(settings.state_dir / "timeouts.jsonl"),
        budget=budget or ShutdownBudget(),
        idle_retry=retry or idle_retry_policy(settings.idle_retries),
        reach=AgentReach(SERVER_URL, AGENT_ENV),
        clock=clock,
    )


def transcript(server: FakeTaskServer, task_id: str, metrics: Metrics | None = None) -> Transcript:
    """A task's transcript sent to `server`."""
    return Transcript(server, task_id, metrics or Metrics())


def retries(
    backend: Backend,
    settings: Settings,
    task_id: str,
    *,
    transcript: Transcript,
    retry: RetryPolicy | None = None,
) -> Retries:
    """The attempts and retries of one task (its incidents in the state directory)."""
    shared = services(settings, FakeTaskServer(), retry=retry)
    activity = Activity(shared.clock)
    fires = shared.metrics.watchdog_fires
    incidents = TaskIncidents(shared.incidents, task_id, backend.name, activity, fires)
    return Retries(backend, shared, activity, transcript, incidents)


def reporter(
    task_id: str,
    server: FakeTaskServer,
    settings: Settings,
    *,
    metrics: Metrics | None = None,
    budget: ShutdownBudget | None = None,
) -> Reporter:
    """The reporter of one task to `server`, its outbox in the state directory."""
    return Reporter(task_id, "scripted", services(settings, server, metrics=metrics, budget=budget))


def task_run(
    task: Task,
    backend: Backend,
    *,
    server: FakeTaskServer,
    settings: Settings,
    metrics: Metrics | None = None,
    budget: ShutdownBudget | None = None,
    retry: RetryPolicy | None = None,
    clock: Callable[[], float] = time.monotonic,
    slot: int = 0,
) -> TaskRun:
    """One task's run against `server`, as the worker would start it in `slot`."""
    shared = services(settings, server, metrics=metrics, budget=budget, retry=retry, clock=clock)
    return TaskRun(task, backend, slot, shared)


def worker(
    settings: Settings,
    server: FakeTaskServer,
    backends: Mapping[str, tuple[Backend, str]],
    *,
    metrics: Metrics | None = None,
) -> Worker:
    """A worker claiming from `server` and running tasks on `backends` (name → backend, version)."""
    metrics = metrics or Metrics()
    return Worker(
        settings,
        # The worker's client type is the real client; the fake answers every call it makes.
        cast(ServerClient, server),
        backends,
        reach=AgentReach(SERVER_URL, AGENT_ENV),
        metrics=metrics,
        circuit=CircuitBreaker(metrics=metrics),
        budget=ShutdownBudget(),
    )
