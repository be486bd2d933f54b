"""What the model providers last refused, per backend: rate limits, quotas, auth, outages.

The worker records every finished task here; a provider failure is counted
(`agent_daemon_provider_failures_total`), logged once with its reason and, where the agent
said one, when the limit lifts, and kept as the backend's last, which `status` shows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.snapshot import ProviderFailure
from daemon.times import utc_iso

log = logging.getLogger(__name__)

PROVIDER_REASONS = frozenset(
    {
        "agent_error.provider_auth_or_access",
        "agent_error.provider_quota_limit",
        "agent_error.provider_capacity_or_rate_limit",
        "agent_error.provider_server_error",
        "agent_error.provider_network",
        "agent_error.model_not_found_or_unavailable",
    }
)
"""The failures the provider caused, not the agent or the daemon."""


class ProviderFailures:
    """The last provider failure of each backend, with a counter and a log line for each."""

    def __init__(self, metrics: Metrics, clock: Callable[[], str] = utc_iso) -> None:
        self._metrics = metrics
        self._clock = clock
        self._last: dict[str, ProviderFailure] = {}

    def record(self, task_id: str, backend: str, reason: str, resets: str = "") -> None:
        """Note how a task ended; only a provider failure is kept."""
        if reason not in PROVIDER_REASONS:
            return
        self._metrics.provider_failures.labels(backend, reason).inc()
        when = f" resets={resets!r}" if resets else ""
        log.warning(
            "task %s: provider failure backend=%s reason=%s%s",
            short_id(task_id),
            backend,
            reason,
            when,
        )
        self._last[backend] = ProviderFailure(backend, reason, self._clock(), resets, task_id)

    def snapshot(self) -> tuple[ProviderFailure, ...]:
        """The last failure of each backend that had one, by backend name."""
        return tuple(self._last[name] for name in sorted(self._last))
