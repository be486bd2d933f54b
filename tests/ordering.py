"""The order the suite hands its tests to the workers: long tests first, mixed with short ones.

The workers take tests in collection order, one or two at a time (`--maxschedchunk 1`),
so the order decides the wall time as much as the tests do:

* A long test taken last leaves one worker running alone at the end: the chaos test's minute
  of outage, started after everything else, would add that minute to the suite. Long tests go
  first, the longest at the front, and the short ones fill in behind them.
* The long tests are whole daemons, real agent CLIs and browsers, which mostly wait (on a
  window, a 10 s tool, a CLI's answer); the short ones are unit tests, which mostly compute.
  Run as two phases, the first leaves the cores idle and the second queues on them. Mixed,
  each long test is followed by a few short ones, so whichever worker is waiting, another
  has work for the cores.

The order changes no test: there are no module-scoped fixtures to share, and each module's
tests keep their relative order.
"""

from __future__ import annotations

import math

import pytest

LONGEST = ("tests/e2e/test_chaos.py",)
"""Modules with a test that runs a minute or more (a timed outage): the very first."""
WHOLE_DAEMONS = ("tests/e2e/", "tests/deploy/", "tests/daemon/ops/test_cli_status.py")
"""Where a test starts a whole daemon (or a browser, or Prometheus) and waits on it."""
SHARE = 2 / 3
"""The long tests are spread over this share of the short ones; the rest close the run, so
the last tests handed out are short and the workers finish together."""


def _path(item: pytest.Item) -> str:
    return item.nodeid.partition("::")[0]


def weight(item: pytest.Item) -> int:
    """0 for the longest tests, 1 for other long ones, 2 for the short ones."""
    path = _path(item)
    if path.startswith(LONGEST):
        return 0
    if path.startswith(WHOLE_DAEMONS) or item.get_closest_marker("real_cli") is not None:
        return 1
    return 2


def interleaved(items: list[pytest.Item]) -> list[pytest.Item]:
    """Long tests first (the longest in front), each followed by its share of short ones."""
    weights = {id(item): weight(item) for item in items}
    long = sorted((i for i in items if weights[id(i)] < 2), key=lambda i: weights[id(i)])
    short = [i for i in items if weights[id(i)] == 2]
    if not long:
        return short
    step = math.ceil(len(short) * SHARE / len(long))
    ordered: list[pytest.Item] = []
    for n, item in enumerate(long):
        ordered.append(item)
        ordered.extend(short[n * step : (n + 1) * step])
    ordered.extend(short[len(long) * step :])
    return ordered
