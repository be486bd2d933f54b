"""The CodeBuddy Code backend: Claude Code's protocol under its own command line and name."""

from __future__ import annotations

from pathlib import Path

from backends.base import RunSpec, RunStatus
from backends.codebuddy import CodebuddyBackend
from backends.codebuddy.backend import CodebuddyStreamParser
from tests.backends.support import feed_file

CLAUDE_FIXTURES = Path(__file__).parents[2] / "fixtures" / "claude-stream-json"


def test_argv_keeps_plan_mode_and_questions_away() -> None:
    """stream-json both ways, bypassed permissions, no question or plan-mode tools."""
    spec = RunSpec(prompt="p", workdir=Path("/w"), env={}, model="m1")
    argv = CodebuddyBackend().argv(spec, resume="s1")
    assert argv[:13] == ["codebuddy", "-p", "--output-format", "stream-json", "--input-format",
                         "stream-json", "--verbose", "--permission-mode", "bypassPermissions",
                         "--disallowedTools", "AskUserQuestion", "EnterPlanMode",
                         "ExitPlanMode"]  # fmt: skip
    assert argv[13:] == ["--model", "m1", "--resume", "s1"]


def test_a_tasks_mcp_servers_add_to_the_users_own() -> None:
    """`--mcp-config` without `--strict-mcp-config`: CodeBuddy's own scopes stay on."""
    spec = RunSpec(prompt="p", workdir=Path("/w"), env={}, mcp_config=Path("/w/.mcp.json"))
    argv = CodebuddyBackend().argv(spec)
    assert argv[13:15] == ["--mcp-config", "/w/.mcp.json"]
    assert "--strict-mcp-config" not in argv


def test_its_runs_report_usage_and_errors_as_codebuddys() -> None:
    """The same stream-json, with CodeBuddy's name on the usage and in errors."""
    parser = CodebuddyStreamParser(version="2.50.0")
    feed_file(parser, CLAUDE_FIXTURES / "text.jsonl")
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.usage
    assert {u.provider for u in result.usage} == {"codebuddy"}
    early = CodebuddyStreamParser().finish(1, "")
    assert early.error.startswith("codebuddy exited with code 1")
