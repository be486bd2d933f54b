"""The Qwen Code backend's command line: stream-json, every tool allowed, arguments filtered."""

from __future__ import annotations

from pathlib import Path

from backends.base import RunSpec
from backends.cli_args import filter_args
from backends.qwen import QwenBackend
from backends.qwen.backend import ARGS


def spec(**fields: object) -> RunSpec:
    return RunSpec(prompt="p", workdir=Path("/tmp"), env={}, **fields)  # type: ignore[arg-type]


def test_argv_streams_json_allows_every_tool_and_resumes_last() -> None:
    """No prompt on the command line (it goes to stdin); the model, the MCP file, the
    session to resume."""
    backend = QwenBackend("/opt/qwen", model="default-model")
    argv = backend.argv(spec(model="qwen3-coder", mcp_config=Path("/run/mcp.json")), resume="s1")
    assert argv == ["/opt/qwen", "--output-format", "stream-json", "--yolo",
                    "--model", "qwen3-coder", "--mcp-config", "/run/mcp.json",
                    "--resume", "s1"]  # fmt: skip
    assert backend.argv(spec())[4:] == ["--model", "default-model"]


def test_arguments_that_change_the_prompt_output_or_approvals_are_dropped() -> None:
    """The daemon's flags (with their values) and positional words go; others stay."""
    given = ["-p", "hello", "--approval-mode", "default", "-o", "text", "words",
             "--exclude-tools", "web_fetch", "--debug", "--resume", "old", "-m", "other",
             "--safe-mode", "--core-tools", "a,b", "--max-session-turns", "9"]  # fmt: skip
    assert filter_args(given, ARGS) == ["--exclude-tools", "web_fetch", "--debug",
                                        "--max-session-turns", "9"]  # fmt: skip


def test_qwens_own_markers_are_not_handed_on() -> None:
    """A daemon started from a Qwen Code shell does not tell its agents they run inside it."""
    env = {"QWEN_CODE": "1", "QWEN_CODE_NO_RELAUNCH": "true", "HOME": "/h"}
    assert QwenBackend("/opt/qwen").strip_markers(env) == {"HOME": "/h"}
