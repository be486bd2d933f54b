"""A loop's round boundary: an unexpected error costs the round, cancellation still passes."""

from __future__ import annotations

import logging

import anyio
import pytest

from daemon.errors import RoundBoundary


def test_an_unexpected_error_ends_the_round_only_and_repeats_log_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three rounds failing alike: all three survive, one traceback, then one line each."""
    boundary = RoundBoundary("heartbeat r1")
    with caplog.at_level(logging.ERROR, logger="daemon.errors"):
        for _ in range(3):
            with boundary:
                raise RecursionError("maximum recursion depth exceeded")
    assert boundary.failures == 3
    assert [r.exc_info is not None for r in caplog.records] == [True, False, False]
    assert "round failed again (RecursionError" in caplog.records[-1].getMessage()


@pytest.mark.anyio
async def test_cancellation_is_not_swallowed() -> None:
    """A loop cancelled inside its round stops: the boundary lets cancellation through."""
    rounds = 0
    with anyio.move_on_after(0.05) as scope:
        while True:
            with RoundBoundary("outbox"):
                rounds += 1
                await anyio.sleep(1)
    assert scope.cancelled_caught and rounds == 1
