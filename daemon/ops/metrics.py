"""Every Prometheus metric the daemon exports, on one explicit registry.

Tests build a fresh `Metrics()` each, so nothing is registered twice. Labels are bounded:
backend, status, failure reason, scope, signal, message type, endpoint, outcome — never a
task id.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
)

import daemon
from daemon.protocol.reports import UsageEntry

_DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 36000)
_REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

CIRCUIT_STATES = {"closed": 0, "half_open": 1, "open": 2}
CHECKOUT_OUTCOMES = ("created", "kept", "refused", "busy", "failed")
"""How a `POST /repo/checkout` ended: a new branch, a checkout kept as it was, a 4xx, a 503
for a busy cache, a 500 (git or the server failed)."""
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")
MODELS_PER_BACKEND = 16
"""Distinct model labels kept per backend; a backend's further models count as `other`."""
DROP_REASONS = ("queue_full", "refused", "unconfirmed")
"""Why transcript messages were given up: the buffer cap while the server was down, the server
refused that message, or its answer was lost and the server does not deduplicate."""


class Metrics:
    """The daemon's metrics; one instance per daemon, each on its own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        p = "agent_daemon_"
        self.tasks_claimed = Counter(f"{p}tasks_claimed", "Tasks claimed", ["backend"], registry=r)
        self.tasks_finished = Counter(
            f"{p}tasks_finished",
            "Tasks finished",
            ["backend", "status", "failure_reason"],
            registry=r,
        )
        self.task_duration = Histogram(
            f"{p}task_duration_seconds",
            "Task run time from claim to terminal report",
            ["backend"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.tasks_running = Gauge(f"{p}tasks_running", "Tasks running now", registry=r)
        self.tools_in_flight = Gauge(
            f"{p}tools_in_flight", "Tool calls in flight across running tasks", registry=r
        )
        self.watchdog_fires = Counter(
            f"{p}watchdog_fires", "Watchdog and timeout firings", ["scope"], registry=r
        )
        self.process_kills = Counter(
            f"{p}process_kills", "Signals sent to agent process groups", ["signal"], registry=r
        )
        self.backend_messages = Counter(
            f"{p}backend_messages", "Messages received from agents", ["type"], registry=r
        )
        self.invalid_agent_lines = Counter(
            f"{p}invalid_agent_lines", "Agent output lines that could not be parsed", registry=r
        )
        self.agent_limits_reached = Counter(
            f"{p}agent_limits_reached",
            "Runs whose cgroup limit acted (memory: the OOM killer; pids: a fork refused)",
            ["limit"],
            registry=r,
        )
        self.server_requests = Counter(
            f"{p}server_requests",
            "Requests to the server",
            ["endpoint", "outcome"],
            registry=r,
        )
        self.server_request_duration = Histogram(
            f"{p}server_request_duration_seconds",
            "Server request latency",
            ["endpoint"],
            buckets=_REQUEST_BUCKETS,
            registry=r,
        )
        self.control_frames = Counter(
            f"{p}control_frames",
            "Frames read on the control WebSocket, by type (heartbeat_ack, rpc_response, "
            "task_available, workspaces_changed, pending_work, other) and outcome (read, "
            "malformed: dropped)",
            ["type", "outcome"],
            registry=r,
        )
        self.server_retries = Counter(
            f"{p}server_retries", "Server requests retried", ["endpoint"], registry=r
        )
        self.circuit_state = Gauge(
            f"{p}circuit_state", "Server circuit: 0 closed, 1 half-open, 2 open", registry=r
        )
        self.transcript_dropped = Counter(
            f"{p}transcript_messages_dropped",
            "Transcript messages given up, by reason: queue_full (buffer cap while the server "
            "was down), refused (the server refused that message), unconfirmed (its answer was "
            "lost, it may be stored, and the server does not deduplicate a re-send)",
            ["reason"],
            registry=r,
        )
        for reason in DROP_REASONS:  # shown as 0 before the first drop
            self.transcript_dropped.labels(reason)
        self.outbox_depth = Gauge(
            f"{p}outbox_depth",
            "Tasks whose report, transcript rest or usage waits in the durable outbox",
            registry=r,
        )
        self.transcript_interval = Gauge(
            f"{p}transcript_interval_seconds",
            "Seconds between a running task's transcript batches (0.5 unless more than 400 "
            "tasks run)",
            registry=r,
        )
        self.heartbeat_age = Gauge(
            f"{p}last_message_age_seconds",
            "Seconds since the most recent agent message across running tasks",
            registry=r,
        )
        self.gc_rounds = Counter(
            f"{p}gc_rounds", "GC rounds, by outcome: ok or error", ["outcome"], registry=r
        )
        self.gc_removed = Counter(
            f"{p}gc_removed",
            "What the GC removed: task dirs (cleaned, orphaned), artifact dirs, repo caches",
            ["what"],
            registry=r,
        )
        self.gc_reclaimed_bytes = Counter(
            f"{p}gc_reclaimed_bytes", "Bytes the GC freed", registry=r
        )
        self.workdir_bytes = Gauge(
            f"{p}workdir_bytes",
            "Bytes under the workspaces root at the last GC round, by part: tasks (all task "
            "dirs), artifacts (their build outputs), repo_caches (.repos)",
            ["part"],
            registry=r,
        )
        self.workdir_tasks = Gauge(
            f"{p}workdir_task_dirs",
            "Task dirs under the workspaces root at the last GC round",
            registry=r,
        )
        self.repo_checkouts = Counter(
            f"{p}repo_checkouts",
            "Repository checkouts agents asked for, by outcome: created, kept (a reused one left "
            "as it was), refused (4xx), busy (503), failed (500)",
            ["outcome"],
            registry=r,
        )
        for outcome in CHECKOUT_OUTCOMES:  # shown as 0 before the first checkout
            self.repo_checkouts.labels(outcome)
        self.tokens = Counter(
            f"{p}tokens",
            "Tokens agents spent, by backend, model and kind (input, output, cache_read, "
            "cache_write), as reported to the server",
            ["backend", "model", "kind"],
            registry=r,
        )
        self._models: dict[str, set[str]] = {}
        self.provider_failures = Counter(
            f"{p}provider_failures",
            "Tasks failed by the model provider (rate limit, quota, auth, model, server, "
            "network), by backend and failure reason",
            ["backend", "reason"],
            registry=r,
        )
        self.build_info = Info(f"{p}build", "Build information", registry=r)
        self.build_info.info({"version": daemon.__version__})

    def count_tokens(self, backend: str, usage: Iterable[UsageEntry]) -> None:
        """Add one task's usage to the token counter (model labels bounded per backend)."""
        models = self._models.setdefault(backend, set())
        for entry in usage:
            model = entry.model or "unknown"
            if model not in models and len(models) >= MODELS_PER_BACKEND:
                model = "other"
            models.add(model)
            counts = (
                entry.input_tokens,
                entry.output_tokens,
                entry.cache_read_tokens,
                entry.cache_write_tokens,
            )
            for kind, count in zip(TOKEN_KINDS, counts, strict=True):
                if count:
                    self.tokens.labels(backend, model, kind).inc(count)

    def exposition(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


class RunObserverMetrics:
    """A run observer (backends.base.RunObserver) that counts into the daemon's metrics."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def signal_sent(self, signal_name: str) -> None:
        """Count a signal sent to part of an agent's process tree."""
        self._metrics.process_kills.labels(signal_name).inc()

    def invalid_line(self) -> None:
        """Count an agent output line that could not be parsed."""
        self._metrics.invalid_agent_lines.inc()

    def limit_reached(self, limit: str) -> None:
        """Count a run that its cgroup refused more memory or processes."""
        self._metrics.agent_limits_reached.labels(limit).inc()
