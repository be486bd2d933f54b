"""Tests for the failure-reason taxonomy shared with a Multica server."""

from __future__ import annotations

import pytest

from backends.base import RunStatus
from daemon.protocol.failure import (
    DAEMON_REASONS,
    REASONS,
    SERVER_REASONS,
    checked_reason,
    failure_reason,
    known_reason,
)


def test_taxonomy_holds_the_servers_reasons_and_the_daemons_own() -> None:
    """The set is the server's 26 reasons plus `idle_watchdog`, `cancelled`, a local
    directory's `local_directory_error` and the memory limit's `agent_error.out_of_memory`, no
    duplicates."""
    assert len(SERVER_REASONS) == 26
    assert len(REASONS) == 30
    assert checked_reason("agent_error.out_of_memory") == "agent_error.out_of_memory"
    assert checked_reason("local_directory_error") == "local_directory_error"
    assert "agent_error.provider_network" in REASONS
    assert "idle_watchdog" in DAEMON_REASONS


def test_the_coarse_agent_error_is_not_a_reason() -> None:
    """`agent_error` alone is outside the taxonomy: the server would never classify it."""
    assert "agent_error" not in REASONS
    assert checked_reason("agent_error") == ""


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (RunStatus.TIMEOUT, "timeout"),
        (RunStatus.IDLE_WATCHDOG, "idle_watchdog"),
        (RunStatus.CANCELLED, "cancelled"),
        (RunStatus.FAILED, ""),
    ],
)
def test_each_ending_maps_to_a_shared_reason_or_none(status: RunStatus, reason: str) -> None:
    """Watchdog, timeout and cancel keep their label; a generic failure leaves it to the server."""
    assert failure_reason(status) == reason
    assert failure_reason(status) == "" or failure_reason(status) in REASONS


def test_an_agent_that_never_started_is_a_missing_executable() -> None:
    """A run whose binary could not start reports the taxonomy's missing-executable reason."""
    reason = failure_reason(RunStatus.FAILED, missing_executable=True)
    assert reason == "agent_error.runtime_missing_executable"
    assert reason in REASONS


def test_a_known_reason_passes_through() -> None:
    """A reason from the taxonomy is sent unchanged."""
    assert checked_reason("agent_error.context_overflow") == "agent_error.context_overflow"


@pytest.mark.parametrize(
    ("reason", "error", "sent"),
    [
        # The backend's reason from the agent's fields wins over the text.
        (
            "agent_error.provider_capacity_or_rate_limit",
            "30,000 input tokens per minute",
            "agent_error.provider_capacity_or_rate_limit",
        ),
        # Without one, Go's daemon order: a poisoning 400 first, then the classifier.
        (
            "",
            'API Error: 400 {"type":"invalid_request_error","message":"bad image"}',
            "api_invalid_request",
        ),
        ("", "stream disconnected before completion", "agent_error.provider_network"),
        # A reason the server does not share is no reason: the text decides.
        ("agent_error", "exit status 2", "agent_error.process_failure"),
        # Nothing known: "" (the server would say agent_error.unknown itself).
        ("", "the agent gave up", ""),
    ],
)
def test_known_reason_prefers_the_fields_then_gos_text_rules(
    reason: str, error: str, sent: str
) -> None:
    """The reason sent: the backend's, else the text rules in Go's order, else ""."""
    assert known_reason(reason, error) == sent
