"""The `failure_reason` values a Multica server understands, and which one a run's end maps to.

The server owns the taxonomy (Go `server/pkg/taskfailure`, `AllReasons()`): it retries the
retryable reasons and shows each one its own way. A reason outside that set is stored as-is and
never classified, so the daemon sends either a value it knows the server shares or an empty
reason, and an empty reason makes the server classify the error text itself. The daemon names
what it can (`known_reason`): it has the agent's structured output, which the text lacks.
"""

from __future__ import annotations

from backends.base import RunStatus
from daemon.protocol.failure_text import API_INVALID_REQUEST, UNKNOWN, classify, poisoned

# `taskfailure.AllReasons()`, in the Go declaration order.
SERVER_REASONS: tuple[str, ...] = (
    "queued_expired",
    "runtime_offline",
    "runtime_reconnect_timeout",
    "runtime_recovery",
    "timeout",
    "iteration_limit",
    "agent_blocked",
    "api_invalid_request",
    "skill_bundle_unavailable",
    "runtime_cli_timeout",
    "invalid_task_identity",
    "issue_window_restricted",
    "agent_error.provider_auth_or_access",
    "agent_error.provider_quota_limit",
    "agent_error.provider_capacity_or_rate_limit",
    "agent_error.provider_server_error",
    "agent_error.provider_network",
    "agent_error.process_failure",
    "agent_error.empty_or_unparseable_output",
    "agent_error.agent_timeout",
    "agent_error.context_overflow",
    "agent_error.missing_config",
    "agent_error.model_not_found_or_unavailable",
    "agent_error.runtime_version_unsupported",
    "agent_error.runtime_missing_executable",
    "agent_error.unknown",
)

# Sent by Multica's own daemon outside the taxonomy: the server stores them and the UI shows
# them apart from real failures (an idle-stopped run is not a timeout, a cancel is no failure).
# A project's local directory that cannot be used as asked is Go's `local_directory_error`.
# And one of this daemon's own, stored as sent too: a run its task's memory limit stopped
# (MULTICA_AGENT_MEMORY_MAX) is neither the agent's error nor the provider's, and classifying
# its "killed by SIGKILL" text would call it a process failure.
DAEMON_REASONS: tuple[str, ...] = (
    "idle_watchdog",
    "cancelled",
    "local_directory_error",
    "agent_error.out_of_memory",
)

REASONS: frozenset[str] = frozenset(SERVER_REASONS + DAEMON_REASONS)

# How a run ended → the reason the Go daemon reports for it; a generic failure is named by
# `known_reason` instead.
_BY_STATUS: dict[RunStatus, str] = {
    RunStatus.TIMEOUT: "timeout",
    RunStatus.IDLE_WATCHDOG: "idle_watchdog",
    RunStatus.CANCELLED: "cancelled",
}


def failure_reason(status: RunStatus, missing_executable: bool = False) -> str:
    """The `failure_reason` for a run that ended with `status`: a shared value, or "" to classify.

    `missing_executable` marks a run whose agent binary could not be started at all, which
    the server's text classifier cannot tell apart from a crash.
    """
    if missing_executable:
        return "agent_error.runtime_missing_executable"
    return _BY_STATUS.get(status, "")


def checked_reason(reason: str) -> str:
    """`reason` when the server shares it, else "" so the server classifies the error text."""
    return reason if reason in REASONS else ""


def known_reason(reason: str, error: str) -> str:
    """The `failure_reason` to send for a failure with this `error` text.

    `reason` is what the backend read from the agent's structured output, and wins when the
    server shares it. Otherwise Multica's text rules decide, in its daemon's order: a 400 that
    poisons the conversation, then the server's classifier. "" only when neither knows
    (the server would call it `agent_error.unknown` itself).
    """
    if checked_reason(reason):
        return reason
    if poisoned(error):
        return API_INVALID_REQUEST
    guess = classify(error)
    return "" if guess == UNKNOWN else guess
