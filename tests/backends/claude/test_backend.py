"""How the Claude Code backend builds its command line and environment (no CLI needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.base import RunSpec
from backends.claude.backend import ClaudeBackend, filter_args, prompt_line
from backends.process.identity import AgentUser


def spec(**fields: object) -> RunSpec:
    base: dict[str, object] = {"prompt": "hi", "workdir": Path("/w"), "env": {"PATH": "/bin"}}
    base.update(fields)
    return RunSpec(**base)  # type: ignore[arg-type]


def test_argv_asks_for_stream_json_both_ways_and_bypassed_permissions() -> None:
    """The fixed flags come first, in the form the CLI documents."""
    argv = ClaudeBackend("/opt/claude").argv(spec())
    assert argv == [
        "/opt/claude",
        "-p",
        "--output-format",
        "stream-json",
        "--input-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
        "--disallowedTools",
        "AskUserQuestion",
    ]


def test_task_model_wins_over_the_default_model() -> None:
    """The task's model is used when given, else the configured default."""
    backend = ClaudeBackend("claude", model="sonnet")
    assert backend.argv(spec())[-2:] == ["--model", "sonnet"]
    assert backend.argv(spec(model="opus"))[-2:] == ["--model", "opus"]


def test_resume_adds_the_session() -> None:
    """Resuming passes the session id with --resume."""
    argv = ClaudeBackend("claude").argv(spec(), resume="abc")
    assert argv[-2:] == ["--resume", "abc"]


def test_configured_then_task_arguments_come_last() -> None:
    """Extra arguments follow the fixed ones, configured before the task's own."""
    backend = ClaudeBackend("claude", ["--max-turns", "5"])
    argv = backend.argv(spec(extra_args=["--fallback-model", "haiku"]))
    assert argv[-4:] == ["--max-turns", "5", "--fallback-model", "haiku"]


def test_format_arguments_are_dropped_with_their_values() -> None:
    """Arguments that would switch the stream format, or set the effort (the agent's thinking
    level is the daemon's to give), are refused, in both spellings."""
    args = ["--output-format", "text", "--verbose", "--input-format=text", "--max-turns", "3",
            "--effort", "max", "--effort=low"]  # fmt: skip
    assert filter_args(args) == ["--verbose", "--max-turns", "3"]


def test_session_markers_are_stripped_from_the_environment() -> None:
    """Variables a running Claude Code sets for its children never reach the agent."""
    env = {
        "PATH": "/bin",
        "CLAUDECODE": "1",
        "CLAUDE_CODE_ENTRYPOINT": "cli",
        "CLAUDE_CODE_SESSION_ID": "s",
        "CLAUDE_CODE_MAX_RETRIES": "3",
    }
    got = ClaudeBackend("claude", is_root=False).env(spec(env=env))
    assert got == {"PATH": "/bin", "CLAUDE_CODE_MAX_RETRIES": "3"}


def test_root_gets_is_sandbox() -> None:
    """As root IS_SANDBOX=1 is set (the CLI refuses bypassPermissions otherwise); not otherwise."""
    assert ClaudeBackend("claude", is_root=True).env(spec())["IS_SANDBOX"] == "1"
    assert "IS_SANDBOX" not in ClaudeBackend("claude", is_root=False).env(spec())


def test_an_agent_user_runs_without_is_sandbox() -> None:
    """A root daemon starting the CLI as an agent user claims no sandbox: the CLI runs
    unprivileged, where bypass mode needs none."""
    user = AgentUser("agent", 10001, 10001, (10001,), "/home/agent")
    assert "IS_SANDBOX" not in ClaudeBackend("claude", is_root=True).env(spec(user=user))


def test_root_overrides_a_host_is_sandbox_value() -> None:
    """A host's `IS_SANDBOX=yes` is replaced by `1` as root, and passed through otherwise."""
    host = spec(env={"IS_SANDBOX": "yes", "PATH": "/usr/bin"})
    assert ClaudeBackend("claude", is_root=True).env(host)["IS_SANDBOX"] == "1"
    assert ClaudeBackend("claude", is_root=False).env(host)["IS_SANDBOX"] == "yes"


def test_prompt_is_one_stream_json_user_message() -> None:
    """The prompt goes in as a single newline-terminated user message."""
    line = prompt_line('say "hi"\nthen stop')
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "type": "user",
        "message": {"role": "user", "content": 'say "hi"\nthen stop'},
    }


def test_relative_cli_path_is_made_absolute() -> None:
    """A relative path is resolved now, not later inside the task's work directory."""
    assert ClaudeBackend("bin/claude").path == str(Path.cwd() / "bin" / "claude")
    assert ClaudeBackend("claude").path == "claude"


def test_an_mcp_config_is_passed_as_the_whole_server_set() -> None:
    """A spec's MCP file goes in with `--mcp-config` and `--strict-mcp-config`; none: neither."""
    argv = ClaudeBackend("claude").argv(spec(mcp_config=Path("/t/mcp-config.json")))
    at = argv.index("--mcp-config")
    assert argv[at + 1 : at + 3] == ["/t/mcp-config.json", "--strict-mcp-config"]
    assert "--mcp-config" not in ClaudeBackend("claude").argv(spec())


def test_configured_arguments_cannot_name_another_mcp_config() -> None:
    """`--mcp-config` in configured or task arguments is dropped with its value."""
    kept = filter_args(["--mcp-config", "/home/u/.mcp.json", "--mcp-config=x.json", "--debug"])
    assert kept == ["--debug"]


@pytest.mark.anyio
async def test_instructions_go_in_a_private_file_never_on_the_command_line(
    tmp_path: Path,
) -> None:
    """Even short instructions are no argument (`/proc/<pid>/cmdline` is world-readable): the
    CLI is told a file in a fresh 0700 folder, which is gone after the run."""
    script = tmp_path / "claude"
    script.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$(pwd)/argv"\n'
        'for a; do [ "$prev" = --append-system-prompt-file ] && cp "$a" "$(pwd)/seen" && '
        'stat -c %a "$(dirname "$a")" > "$(pwd)/mode" && echo "$a" > "$(pwd)/where"; '
        'prev="$a"; done\n'
    )
    script.chmod(0o755)
    run_spec = spec(workdir=tmp_path, instructions="Answer in 4d9b haiku.")
    async with ClaudeBackend(str(script), is_root=False).start(run_spec) as run:
        async for _ in run.messages():
            pass
        await run.result()
    assert "4d9b" not in (tmp_path / "argv").read_text()
    assert (tmp_path / "seen").read_text() == "Answer in 4d9b haiku."
    assert (tmp_path / "mode").read_text().strip() == "700"
    assert not Path((tmp_path / "where").read_text().strip()).parent.exists()
