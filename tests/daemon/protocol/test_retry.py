"""Tests for the retry policies: backoff, jitter bounds, Retry-After, and when to give up."""

from __future__ import annotations

import random
from email.utils import formatdate

import pytest

from daemon.protocol.retry import RetryPolicy, retry_after_seconds

NOW = 1_700_000_000.0
LOW, HIGH = 0.0, 0.999_999  # the extremes the rng can return


def policy(rng_value: float = 0.5, **kwargs: object) -> RetryPolicy:
    return RetryPolicy(rng=lambda: rng_value, wall_clock=lambda: NOW, **kwargs)  # type: ignore[arg-type]


def test_backoff_is_one_two_four_without_jitter() -> None:
    """With the rng at its midpoint the delays are exactly 1s, 2s, 4s."""
    p = policy(0.5)
    assert [p.delay(n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]


def test_gives_up_after_three_retries() -> None:
    """A fourth failed try (three retries spent) is the end."""
    assert policy().delay(4) is None
    assert policy().tries == 4


@pytest.mark.parametrize("rng_value", [LOW, HIGH])
def test_jitter_stays_within_twenty_percent(rng_value: float) -> None:
    """At either extreme of the rng every delay stays within ±20% of its base."""
    p = policy(rng_value)
    for n, base in ((1, 1.0), (2, 2.0), (3, 4.0)):
        delay = p.delay(n)
        assert delay is not None
        assert 0.8 * base <= delay <= 1.2 * base


def test_jitter_spreads_delays() -> None:
    """Real randomness gives different delays, all within the bounds."""
    p = RetryPolicy(rng=random.Random(7).random)
    delays = [p.delay(1) for _ in range(50)]
    assert all(d is not None and 0.8 <= d < 1.2 for d in delays)
    assert len(set(delays)) > 40


def test_retry_after_seconds_is_honoured_as_a_floor() -> None:
    """A 429 waits at least what Retry-After asks, and at most 20% more."""
    assert policy(LOW).delay(1, throttled=True, retry_after="7") == 7.0
    high = policy(HIGH).delay(1, throttled=True, retry_after="7")
    assert high is not None and 7.0 <= high <= 8.4


def test_retry_after_http_date() -> None:
    """An HTTP-date Retry-After is measured against the wall clock."""
    header = formatdate(NOW + 120, usegmt=True)
    assert policy(LOW).delay(1, throttled=True, retry_after=header) == pytest.approx(120.0)


def test_retry_after_is_capped_at_300_seconds() -> None:
    """Even an hour-long Retry-After waits no more than 300s."""
    assert policy(HIGH).delay(1, throttled=True, retry_after="3600") == 300.0
    far = formatdate(NOW + 86_400, usegmt=True)
    assert policy(LOW).delay(1, throttled=True, retry_after=far) == 300.0


def test_throttled_gets_five_tries_in_all() -> None:
    """A 429 is retried up to 5 tries in all, one more than other transient errors."""
    p = policy()
    assert [p.delay(n, throttled=True, retry_after="1") is not None for n in range(1, 6)] == [
        True,
        True,
        True,
        True,
        False,
    ]


def test_throttled_without_retry_after_uses_backoff() -> None:
    """A 429 without a usable Retry-After backs off like any transient error, then doubles."""
    p = policy(0.5)
    got = [p.delay(n, throttled=True, retry_after=None) for n in (1, 2, 3, 4)]
    assert got == [1.0, 2.0, 4.0, 8.0]
    assert p.delay(1, throttled=True, retry_after="soon") == 1.0


def test_report_policy_is_four_to_sixty_four() -> None:
    """Terminal reports wait 4, 8, 16, 32, 64 seconds, then give up."""
    p = RetryPolicy.for_reports(rng=lambda: 0.5)
    assert [p.delay(n) for n in range(1, 7)] == [4.0, 8.0, 16.0, 32.0, 64.0, None]


def test_never_policy_does_not_retry() -> None:
    """The single-try policy gives up after the first failure, 429 included."""
    p = RetryPolicy.never()
    assert p.delay(1) is None
    assert p.delay(1, throttled=True, retry_after="1") is None
    assert p.budget() == 0.0


def test_budget_is_the_longest_possible_wait() -> None:
    """The budget is the sum of the delays at maximum jitter."""
    assert RetryPolicy.for_reports().budget() == pytest.approx(124 * 1.2)
    assert RetryPolicy().budget() == pytest.approx(7 * 1.2)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("0", 0.0),
        (" 12 ", 12.0),
        ("1.5", 1.5),
        ("-3", None),
        ("nan", None),
        ("", None),
        (None, None),
        ("next tuesday", None),
        (formatdate(NOW - 60, usegmt=True), 0.0),
        ("Wed, 15 Nov 2023 00:00:00 -0000", max(0.0, 1_700_006_400.0 - NOW)),
    ],
)
def test_retry_after_parsing(header: str | None, expected: float | None) -> None:
    """Seconds and HTTP-dates parse; a past date means now; nonsense is ignored."""
    assert retry_after_seconds(header, NOW) == expected


def test_growth_one_repeats_the_last_delay_up_to_the_try_limit() -> None:
    """Idle-retry shape: no jitter, the last delay repeats, `max_tries` bounds the tries."""
    p = RetryPolicy((0.0, 5.0, 15.0), max_tries=5, growth=1.0, jitter=0.0)
    assert [p.delay(n) for n in range(1, 6)] == [0.0, 5.0, 15.0, 15.0, None]


def test_no_try_limit_doubles_up_to_the_cap() -> None:
    """Registration shape: tried until it works, 1 s doubling up to `max_wait`."""
    p = RetryPolicy((1.0,), max_tries=0, max_wait=30.0, jitter=0.0)
    assert [p.delay(n) for n in (1, 2, 3, 5, 6, 50)] == [1.0, 2.0, 4.0, 16.0, 30.0, 30.0]
