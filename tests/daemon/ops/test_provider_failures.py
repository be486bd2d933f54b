"""The daemon's own view of provider limits: a counter, a log line, each backend's last one;
and the token counter, with its model labels bounded."""

from __future__ import annotations

import logging

import pytest

from daemon.cli.status_view import render
from daemon.cli.submit import usage_line
from daemon.ops.metrics import MODELS_PER_BACKEND, Metrics
from daemon.ops.provider_failures import ProviderFailures
from daemon.protocol.reports import UsageEntry

QUOTA = "agent_error.provider_quota_limit"
AT = "2030-01-02T03:04:05Z"


def test_a_provider_failure_is_counted_logged_and_kept_as_the_last(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A quota failure counts, logs its reason and reset time, and is its backend's last;
    a failure the provider did not cause (or a success) is not kept."""
    metrics = Metrics()
    failures = ProviderFailures(metrics, clock=lambda: AT)
    caplog.set_level(logging.WARNING, "daemon.ops.provider_failures")
    failures.record("task-1", "codex", "agent_error.provider_capacity_or_rate_limit")
    failures.record("task-2", "codex", QUOTA, "2:05 PM")
    for reason in ("", "idle_watchdog", "agent_error.context_overflow", "agent_error.unknown"):
        failures.record("task-3", "claude", reason)
    (last,) = failures.snapshot()
    assert (last.backend, last.reason, last.at, last.resets) == ("codex", QUOTA, AT, "2:05 PM")
    assert metrics.provider_failures.labels("codex", QUOTA)._value.get() == 1
    assert caplog.messages[-1] == (
        f"task task2: provider failure backend=codex reason={QUOTA} resets='2:05 PM'"
    )


def test_status_shows_each_backends_last_provider_failure() -> None:
    """One line a backend, with the reset time when the agent named one."""
    doc = {
        "provider_failures": [
            {"backend": "claude", "reason": "agent_error.provider_network", "at": AT, "resets": ""},
            {"backend": "codex", "reason": QUOTA, "at": AT, "resets": "2:05 PM"},
        ]
    }
    lines = render(doc).splitlines()
    assert f"provider   claude: agent_error.provider_network at {AT}" in lines
    assert f"provider   codex: {QUOTA} at {AT}, resets 2:05 PM" in lines


def test_tokens_are_counted_by_kind_with_bounded_models() -> None:
    """Each kind counts; past the per-backend cap, new models count as `other`."""
    metrics = Metrics()
    entry = UsageEntry(provider="claude", model="m0", input_tokens=5, cache_read_tokens=2)
    metrics.count_tokens("claude", [entry, entry])
    assert metrics.tokens.labels("claude", "m0", "input")._value.get() == 10
    assert metrics.tokens.labels("claude", "m0", "cache_read")._value.get() == 4
    many = [UsageEntry(model=f"m{n}", output_tokens=1) for n in range(MODELS_PER_BACKEND + 3)]
    metrics.count_tokens("claude", many)
    assert metrics.tokens.labels("claude", "other", "output")._value.get() == 3
    models = {s.labels["model"] for m in metrics.tokens.collect() for s in m.samples}
    assert len(models) == MODELS_PER_BACKEND + 1


def test_submit_sums_a_tasks_usage_on_one_line() -> None:
    """`submit --wait` ends with the task's tokens by kind and the models that spent them."""
    usage = [
        {
            "provider": "claude",
            "model": "a",
            "input_tokens": 100,
            "output_tokens": 20,
            "cache_read_tokens": 7,
            "cache_write_tokens": 3,
        },
        {"provider": "claude", "model": "b", "input_tokens": 1},
    ]
    assert usage_line(usage) == (
        "tokens: 101 input, 20 output, 7 cache read, 3 cache write (claude/a, claude/b)"
    )
