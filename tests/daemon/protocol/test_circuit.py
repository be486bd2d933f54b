"""Tests for the circuit breaker that pauses claims while the server keeps failing."""

from __future__ import annotations

from daemon.ops.metrics import CIRCUIT_STATES, Metrics
from daemon.protocol.circuit import CircuitBreaker
from daemon.testing import FakeClock


def opened(clock: FakeClock, metrics: Metrics | None = None) -> CircuitBreaker:
    breaker = CircuitBreaker(clock=clock, metrics=metrics)
    for _ in range(3):
        breaker.record_failure()
    return breaker


def test_starts_closed_and_allows() -> None:
    """A fresh circuit is closed and lets claims through."""
    breaker = CircuitBreaker(clock=FakeClock())
    assert breaker.state == "closed"
    assert breaker.allow()


def test_opens_after_three_consecutive_failures() -> None:
    """Two failures keep it closed; the third opens it and claims stop."""
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock)
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_failure()
    assert breaker.state == "open"
    assert not breaker.allow()


def test_success_resets_the_count() -> None:
    """Failures must be consecutive: a success in between starts the count again."""
    breaker = CircuitBreaker(clock=FakeClock())
    for _ in range(2):
        breaker.record_failure()
    breaker.record_success()
    for _ in range(2):
        breaker.record_failure()
    assert breaker.state == "closed"


def test_stays_open_for_the_cooldown() -> None:
    """Just before 30s have passed, the circuit is still open."""
    clock = FakeClock()
    breaker = opened(clock)
    clock.advance(29.9)
    assert breaker.state == "open"
    assert not breaker.allow()
    assert abs(breaker.seconds_until_probe() - 0.1) < 1e-9


def test_half_open_lets_exactly_one_probe_through() -> None:
    """After the cooldown one claim may go; the next asks are refused until it reports."""
    clock = FakeClock()
    breaker = opened(clock)
    clock.advance(30)
    assert breaker.state == "half_open"
    assert breaker.allow()
    assert not breaker.allow()
    clock.advance(10)
    assert not breaker.allow()


def test_probe_success_closes() -> None:
    """A successful probe closes the circuit and claims flow again."""
    clock = FakeClock()
    breaker = opened(clock)
    clock.advance(30)
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state == "closed"
    assert breaker.allow()
    assert breaker.allow()


def test_probe_failure_reopens_for_another_cooldown() -> None:
    """A failed probe opens the circuit again for a full cooldown."""
    clock = FakeClock()
    breaker = opened(clock)
    clock.advance(30)
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state == "open"
    clock.advance(29)
    assert not breaker.allow()
    clock.advance(1)
    assert breaker.allow()


def test_failures_while_open_do_not_extend_the_cooldown() -> None:
    """Heartbeats failing while the circuit is open do not push the probe further away."""
    clock = FakeClock()
    breaker = opened(clock)
    clock.advance(20)
    breaker.record_failure()
    clock.advance(10)
    assert breaker.allow()


def test_lost_probe_does_not_wedge_the_circuit() -> None:
    """A probe whose outcome never came back is replaced after another cooldown."""
    clock = FakeClock()
    breaker = opened(clock)
    clock.advance(30)
    assert breaker.allow()
    clock.advance(30)
    assert breaker.allow()


def test_metrics_gauge_follows_the_state() -> None:
    """The circuit_state gauge reads 0 closed, 2 open, 1 half-open."""
    metrics = Metrics()
    clock = FakeClock()

    def gauge() -> float | None:
        return metrics.registry.get_sample_value("agent_daemon_circuit_state")

    breaker = CircuitBreaker(clock=clock, metrics=metrics)
    assert gauge() == CIRCUIT_STATES["closed"]
    for _ in range(3):
        breaker.record_failure()
    assert gauge() == CIRCUIT_STATES["open"]
    clock.advance(30)
    breaker.allow()
    assert gauge() == CIRCUIT_STATES["half_open"]
    breaker.record_success()
    assert gauge() == CIRCUIT_STATES["closed"]


def test_custom_threshold_and_cooldown() -> None:
    """The threshold and cooldown are constructor arguments."""
    clock = FakeClock()
    breaker = CircuitBreaker(threshold=1, cooldown=5.0, clock=clock)
    breaker.record_failure()
    assert breaker.state == "open"
    clock.advance(5)
    assert breaker.state == "half_open"
