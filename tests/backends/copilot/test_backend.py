"""The Copilot backend's command line: Multica's flags, the model, the session, the filter."""

from __future__ import annotations

from pathlib import Path

from backends.base import RunSpec
from backends.copilot import CopilotBackend

HEADLESS = ["--output-format", "json", "--allow-all", "--no-ask-user"]


def spec(tmp_path: Path, **fields: object) -> RunSpec:
    return RunSpec(prompt="Fix it.", workdir=tmp_path, env={}, **fields)  # type: ignore[arg-type]


def test_the_prompt_is_an_argument_of_a_headless_json_run(tmp_path: Path) -> None:
    """`copilot -p PROMPT --output-format json --allow-all --no-ask-user`, nothing more."""
    assert CopilotBackend("copilot").argv(spec(tmp_path)) == ["copilot", "-p", "Fix it.", *HEADLESS]


def test_model_and_session_to_resume_are_flags(tmp_path: Path) -> None:
    """The task's model (else the configured one) and the session go in as flags."""
    backend = CopilotBackend("/opt/copilot", model="gpt-5")
    assert backend.argv(spec(tmp_path), resume="s-1")[-4:] == [
        "--model",
        "gpt-5",
        "--resume",
        "s-1",
    ]
    assert "gpt-4.1" in backend.argv(spec(tmp_path, model="gpt-4.1"))


def test_instructions_go_first_in_the_prompt(tmp_path: Path) -> None:
    """The CLI has no system-prompt flag: instructions lead the prompt."""
    argv = CopilotBackend().argv(spec(tmp_path, instructions="Be brief."))
    assert argv[1:3] == ["-p", "Be brief.\n\nFix it."]


def test_configured_arguments_cannot_take_over_the_daemons_flags(tmp_path: Path) -> None:
    """A configured output format, prompt, session or ACP switch is dropped with its value;
    anything else is passed on after the daemon's flags."""
    args = ["--output-format", "text", "--resume=old", "--acp", "-p", "x", "--max-turns", "5"]
    argv = CopilotBackend("copilot", args).argv(spec(tmp_path))
    assert argv == ["copilot", "-p", "Fix it.", *HEADLESS, "--max-turns", "5"]
