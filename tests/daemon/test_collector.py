"""The garbage collector's settings once the daemon is up (daemon/collector.py)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest

from daemon.collector import settle_collector


@pytest.fixture
def settled() -> Iterator[None]:
    """The collector settled as the daemon settles it, then put back as the suite had it."""
    thresholds = gc.get_threshold()
    gc.collect()  # counts start from zero
    settle_collector()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def _young_collections_during(work: Callable[[], None]) -> int:
    runs = 0

    def count(phase: str, info: dict[str, int]) -> None:
        nonlocal runs
        if phase == "start" and info["generation"] == 0:
            runs += 1

    gc.callbacks.append(count)
    try:
        work()
    finally:
        gc.callbacks.remove(count)
    return runs


def _a_beat() -> None:
    """What one beat keeps alive at once with 200 tasks, then frees: some 4,000 containers."""
    for _ in range(5):
        alive = [[index] for index in range(4_000)]
        del alive


def test_a_beats_short_lived_objects_run_no_collection(settled: None) -> None:
    """Objects freed by reference counting never set off a collection (at CPython's 700, these
    five beats ran 23)."""
    assert _young_collections_during(_a_beat) == 0


def test_objects_piling_up_are_still_collected(settled: None) -> None:
    """Past the threshold the young generation is collected as before: garbage that only a
    collection frees does not grow without end."""

    def pile_up() -> None:
        for _ in range(30_000):
            loop: list[object] = []
            loop.append(loop)  # a cycle: only a collection frees it

    assert _young_collections_during(pile_up) >= 2


def test_what_lives_when_the_daemon_is_up_is_out_of_the_collectors_sight(settled: None) -> None:
    """Start-up's objects (this test's module among them) are frozen: a full collection no
    longer walks them."""
    assert gc.get_freeze_count() > 1_000
    assert not any(obj is _a_beat for obj in gc.get_objects())
