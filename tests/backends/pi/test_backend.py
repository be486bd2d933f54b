"""The Pi backend's command line: the daemon's flags, the model whole, the arguments filtered."""

from __future__ import annotations

from pathlib import Path

from backends.base import RunSpec
from backends.cli_args import filter_args
from backends.pi import PiBackend
from backends.pi.backend import ARGS


def spec(**fields: object) -> RunSpec:
    return RunSpec(prompt="p", workdir=Path("/tmp"), env={}, **fields)  # type: ignore[arg-type]


def test_argv_reads_the_prompt_from_stdin_in_json_mode_with_the_model_whole() -> None:
    """`pi -p --mode json`, a gateway model id passed whole, the session to resume last."""
    backend = PiBackend("/opt/pi", model="default-model")
    argv = backend.argv(spec(model="gateway/claude/opus"), resume="s1")
    assert argv == ["/opt/pi", "-p", "--mode", "json", "--model", "gateway/claude/opus",
                    "--session", "s1"]  # fmt: skip
    assert backend.argv(spec())[4:] == ["--model", "default-model"]
    assert "--session" not in backend.argv(spec())


def test_arguments_that_would_change_the_prompt_or_the_output_are_dropped() -> None:
    """The daemon's flags (with their values: the thinking level is the agent's, given by the
    daemon), `@file` and positional words go; other flags keep their values, standalone flags
    take none."""
    given = ["--mode", "text", "-p", "--thinking", "high", "@notes.md", "extra words",
             "--no-skills", "stray", "--session=x", "--tools", "read,bash",
             "--ext-flag=1"]  # fmt: skip
    assert filter_args(given, ARGS) == ["--no-skills", "--tools", "read,bash", "--ext-flag=1"]


def test_pis_own_session_marker_is_not_handed_on() -> None:
    """A daemon started from inside Pi does not tell its agents they run inside Pi."""
    backend = PiBackend("/opt/pi")
    assert backend.strip_markers({"PI_CODING_AGENT": "true", "HOME": "/h"}) == {"HOME": "/h"}
