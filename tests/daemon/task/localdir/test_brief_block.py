"""The brief as a block in a user's own brief file, and the file's exact bytes afterwards."""

from __future__ import annotations

import pytest

from daemon.task.localdir.brief_block import BEGIN, END, excised, injected


@pytest.mark.parametrize(
    "original",
    [None, "", "\n", "# Mine", "# Mine\n", "# Mine\n\n\n", "  \n\t", "tail\n" + END + "\n"],
)
def test_the_file_returns_to_its_exact_bytes(original: str | None) -> None:
    """Missing, empty, without or with trailing newlines, holding a stray end marker: the
    file round-trips byte for byte (a file that was missing is removed again)."""
    content = injected(original, "the brief\n")
    assert "the brief" in content and content.count(BEGIN) == 1
    assert excised(content) == original


def test_a_crashed_runs_block_is_replaced_where_it_stands() -> None:
    """A block left by an earlier run is replaced, not stacked; taking it out still gives the
    user's bytes."""
    once = injected("# Mine\n", "old brief")
    twice = injected(once + "user line after\n", "new brief")
    assert twice.count(BEGIN) == 1 and "new brief" in twice and "old brief" not in twice
    assert excised(twice) == "# Mine\nuser line after\n"


def test_a_begin_marker_without_an_end_is_a_block_to_the_end() -> None:
    """A half-written block is replaced by the next write and taken out whole."""
    broken = "# Mine\n\n\n" + BEGIN + "\nhalf a brief"
    assert injected(broken, "whole").endswith(END + "\n")
    assert excised(broken) == "# Mine\n"


def test_a_file_without_a_block_is_left_as_it_is() -> None:
    """Nothing of ours in it: nothing changes."""
    assert excised("# Mine\n") == "# Mine\n"
