"""The order the workers take the tests in: long ones first, short ones mixed in behind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from tests.ordering import interleaved


@dataclass
class Item:
    """What the ordering reads of a collected test: its node id and its markers."""

    nodeid: str
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.markers else None


def order(items: list[Item]) -> list[str]:
    return [i.nodeid for i in interleaved(cast(list[pytest.Item], items))]


def test_long_tests_come_first_each_followed_by_short_ones_and_short_ones_close() -> None:
    short = [Item(f"tests/daemon/test_unit.py::test_{n}") for n in range(12)]
    e2e = [Item(f"tests/e2e/test_flow.py::test_{n}") for n in range(3)]
    real = Item("tests/backends/claude/test_real.py::test_answer", ("real_cli",))
    chaos = Item("tests/e2e/test_chaos.py::test_outage")
    items = [*short[:6], real, *e2e, chaos, *short[6:]]
    got = order(items)
    assert sorted(got) == sorted(i.nodeid for i in items)  # nothing lost, nothing twice
    assert got[0] == chaos.nodeid  # the minute-long test before everything
    long = {real.nodeid, chaos.nodeid, *(i.nodeid for i in e2e)}
    positions = [got.index(n) for n in long]
    # Five long tests over two thirds of the twelve short ones: two short ones after each.
    assert sorted(positions) == [0, 3, 6, 9, 12]
    assert all(n not in long for n in got[13:])
    # Each module's tests keep their order.
    assert [n for n in got if "test_unit" in n] == [i.nodeid for i in short]
    assert [n for n in got if "test_flow" in n] == [i.nodeid for i in e2e]


def test_a_run_of_short_tests_only_keeps_its_order() -> None:
    short = [Item(f"tests/daemon/test_unit.py::test_{n}") for n in range(5)]
    assert order(short) == [i.nodeid for i in short]
