"""Field caps: text cut with a marker, tool inputs cut in depth and size, reports capped."""

from __future__ import annotations

import json

from daemon.protocol.limits import (
    ERROR_CAP,
    INPUT_CAP,
    INPUT_DEPTH,
    RESULT_CAP,
    bounded_input,
    cap,
    clean,
    fit,
)
from daemon.protocol.reports import TerminalReport


def test_cap_keeps_the_limit_and_says_how_much_was_cut() -> None:
    """Past the limit the text keeps that many bytes, then the count of the rest."""
    assert cap("abc", 10) == "abc"
    assert cap("a" * 30, 10) == "a" * 10 + "\n… [20 more bytes not sent]"


def test_cap_never_splits_a_character() -> None:
    """A cut inside a multi-byte character drops that character, never leaving half of it."""
    text = "é" * 10  # 2 bytes each
    cut = cap(text, 5)
    assert cut.startswith("éé\n")
    cut.encode("utf-8")


def test_fit_stays_within_the_limit_and_fitting_twice_changes_nothing() -> None:
    """`fit` includes its marker in the limit, so a stored report reads back unchanged."""
    once = fit("x" * 5000, 1000)
    assert len(once.encode()) <= 1000
    assert once.endswith("more bytes not sent]")
    assert fit(once, 1000) == once


def test_clean_drops_nul_and_lone_surrogates() -> None:
    """NUL bytes go; a lone surrogate becomes a replacement character."""
    assert clean("a\x00b") == "ab"
    assert clean("x\ud800y").encode("utf-8") == b"x?y"


def test_a_small_input_is_kept_as_it_is() -> None:
    """An ordinary tool input goes through unchanged."""
    value = {"command": "ls -la", "timeout": 120, "flags": [1, 2, {"a": None}]}
    assert bounded_input(value) == (value, len(json.dumps(value, separators=(",", ":"))))


def test_a_deep_input_is_cut_at_the_depth_limit() -> None:
    """Nesting past INPUT_DEPTH becomes a marker string; what is above it is kept."""
    deep: dict[str, object] = {}
    cur = deep
    for _ in range(300):
        cur["a"] = nxt = {}
        cur = nxt
    shaped, _ = bounded_input(deep)
    levels, value = 0, shaped
    while isinstance(value, dict):
        value = value["a"]
        levels += 1
    assert levels == INPUT_DEPTH
    assert isinstance(value, str) and "nested deeper than" in value
    json.dumps(shaped)  # well within any parser's recursion limit


def test_a_huge_input_becomes_the_start_of_its_json() -> None:
    """An input over INPUT_CAP in all is replaced by the start of its JSON text, marked."""
    value = {f"k{i}": "v" * 1000 for i in range(1000)}
    shaped, size = bounded_input(value)
    assert size < INPUT_CAP
    assert list(shaped) == ["truncated"]
    assert shaped["truncated"].startswith('{"k0":"vvv')
    assert shaped["truncated"].endswith("more bytes not sent]")
    assert len(json.dumps(shaped)) < INPUT_CAP


def test_terminal_report_fields_are_capped() -> None:
    """A result and an error past their caps are cut with a marker, whoever built the report."""
    done = TerminalReport(kind="complete", output="r" * (RESULT_CAP + 10))
    failed = TerminalReport(kind="fail", error="e" * (ERROR_CAP * 2))
    assert len(done.output.encode()) <= RESULT_CAP and done.output.endswith("not sent]")
    assert len(failed.error.encode()) <= ERROR_CAP
    assert TerminalReport.model_validate_json(done.model_dump_json()) == done


def test_a_refused_result_goes_shorter_then_as_a_failure() -> None:
    """After a refusal a long result is cut to the short cap; a short one becomes a `fail`
    saying why; a report with nothing shorter to try is given up (None)."""
    done = TerminalReport(kind="complete", output="r" * 200_000, session_id="s", work_dir="/w")
    shorter = done.after_refusal("too large")
    assert shorter is not None and shorter.kind == "complete"
    assert len(shorter.output) < len(done.output)
    failed = shorter.after_refusal("too large")
    assert failed is not None
    assert (failed.kind, failed.session_id, failed.work_dir) == ("fail", "s", "/w")
    assert failed.error == "the server refused the task's result: too large"
    assert failed.after_refusal("no") is None
    assert TerminalReport(kind="cancel_ack").after_refusal("no") is None


def test_an_input_with_nul_or_a_lone_surrogate_is_cleaned() -> None:
    """NUL (refused by a PostgreSQL jsonb column) and lone surrogates (not JSON-encodable) are
    cleaned out of a tool input's strings, nested ones too."""
    shaped, _ = bounded_input({"a": "x\x00y", "b": ["\ud800z"]})
    assert shaped["a"] == "xy"
    assert json.dumps(shaped, ensure_ascii=False).encode("utf-8")
