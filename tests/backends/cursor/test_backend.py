"""The Cursor Agent backend's command line: print mode, stream-json, its workspace."""

from __future__ import annotations

from pathlib import Path

from backends.base import RunSpec
from backends.cli_args import filter_args
from backends.cursor import CursorBackend
from backends.cursor.backend import ARGS


def spec(**fields: object) -> RunSpec:
    return RunSpec(prompt="p", workdir=Path("/w/t1"), env={}, **fields)  # type: ignore[arg-type]


def test_argv_prints_stream_json_in_the_task_workspace_and_resumes() -> None:
    """No prompt on the command line (stdin); `--yolo`, the workspace, model and session."""
    backend = CursorBackend(model="default")
    assert backend.path == "cursor-agent"
    argv = backend.argv(spec(model="gpt-5"), resume="s1")
    assert argv == ["cursor-agent", "-p", "--output-format", "stream-json", "--yolo",
                    "--workspace", "/w/t1", "--model", "gpt-5", "--resume", "s1"]  # fmt: skip
    assert backend.argv(spec())[-2:] == ["--model", "default"]


def test_arguments_that_change_the_output_or_approvals_are_dropped() -> None:
    """The daemon's flags with their values, and positional words, go; others stay."""
    given = ["--output-format", "text", "--resume", "x", "hello", "--approve-mcps", "-f"]
    assert filter_args(given, ARGS) == ["--approve-mcps"]
