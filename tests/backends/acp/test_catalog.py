"""The ACP agents the daemon offers: each entry's command line, and which are untested."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.acp import AcpBackend
from backends.acp.catalog import AGENTS
from backends.base import RunSpec
from daemon.cli.discovery import candidates
from daemon.config import Settings

# Multica's command line for each ACP agent, after the executable.
COMMANDS = {
    "opencode": ["opencode", "acp"],
    "gemini": ["gemini", "--acp", "--skip-trust"],
    "hermes": ["hermes", "acp"],
    "kimi": ["kimi", "acp"],
    "kiro": ["kiro-cli", "acp", "--trust-all-tools"],
    "qoder": ["qodercli", "--yolo", "--acp"],
    "qoderclicn": ["qoderclicn", "--yolo", "--acp"],
    "traecli": ["traecli", "acp", "serve", "--yolo"],
    "grok": ["grok", "--no-auto-update", "agent", "--always-approve", "stdio"],
    "qwenpaw": ["qwenpaw", "acp"],
    "mcode": ["mcode", "acp"],
    "dim": ["dim", "acp"],
    "reasonix": [
        "reasonix",
        "acp",
        "--profile",
        "balanced",
        "--planner",
        "auto",
        "--sandbox-network",
        "auto",
        "--sandbox-bash",
        "auto",
        "--workspace-only",
    ],
}
TESTED = {"opencode", "gemini", "hermes", "grok", "qwenpaw"}


def test_the_catalog_lists_every_acp_agent_multica_runs() -> None:
    """Every ACP runtime type of Multica's daemon has one entry, under that name."""
    assert [agent.name for agent in AGENTS] == list(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_entry_builds_multicas_command_line(tmp_path: Path, name: str) -> None:
    """With no path configured, the entry's executable runs with its ACP arguments, and a
    configured model goes through the session unless the CLI has a model flag."""
    settings = Settings.from_env({"HOME": str(tmp_path)})
    backend = {b.name: b for b in candidates(settings)}[name]
    assert isinstance(backend, AcpBackend)
    spec = RunSpec(prompt="p", workdir=tmp_path, env={}, model="m1")
    flag = [backend.agent.model_flag, "m1"] if backend.agent.model_flag else []
    assert backend.argv(spec) == [*COMMANDS[name], *flag]


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - TESTED))
def test_an_entry_no_test_ran_is_marked_untested(name: str) -> None:
    """The entries no test drives say so, and why."""
    (agent,) = [a for a in AGENTS if a.name == name]
    assert "offline" in agent.untested


def test_entries_the_tests_drive_are_not_marked_untested() -> None:
    """The entries whose real CLIs the tests run (OpenCode, Gemini CLI, Hermes, Grok,
    QwenPaw) carry no untested mark."""
    assert {a.name for a in AGENTS if not a.untested} == TESTED


def test_usage_is_counted_as_the_cli_s_own_unless_an_entry_names_whose() -> None:
    """An entry naming no provider counts its usage under its own name; Gemini's is Google's."""
    providers = {agent.name: agent.provider for agent in AGENTS}
    assert providers["kimi"] == "kimi" and providers["opencode"] == "opencode"
    assert providers["gemini"] == "google"
    assert all(providers.values())
