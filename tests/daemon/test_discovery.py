"""Which backends discovery offers: a CLI older than its backend needs is left out, saying so;
with an agent user every CLI is probed as that user, and one it could rewrite not at all."""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from pathlib import Path

import pytest

from backends.acp import AcpBackend
from backends.acp.catalog import KIMI
from backends.agent_cli import AgentCli
from backends.codex import CodexBackend
from backends.copilot import CopilotBackend
from backends.gemini import GEMINI
from backends.pi import PiBackend
from backends.process.identity import AgentUser
from backends.qwen import QwenBackend
from daemon.cli.discovery import candidates, detect
from daemon.config import Settings
from tests.fakes.agent_cli import euids_of, plant_cli, recording_cli

pytestmark = pytest.mark.anyio


def fake_cli(folder: Path, version: str) -> str:
    """An executable that answers `--version` like the real CLI does."""
    path = folder / f"gemini-{version}"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return str(path)


async def test_old_cli_is_refused_with_one_line_naming_both_versions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A CLI below the backend's minimum is not offered; the log names found and needed."""
    agent = replace(GEMINI, min_version="0.61.0")
    old = AcpBackend(agent, fake_cli(tmp_path, "0.60.2"))
    with caplog.at_level(logging.WARNING, logger="daemon.cli.discovery"):
        assert await detect([old]) == {}
    (line,) = [r.getMessage() for r in caplog.records if r.name == "daemon.cli.discovery"]
    assert line == "backend gemini: version 0.60.2 found, 0.61.0 or newer needed; not used"


async def test_cli_at_the_minimum_is_offered(tmp_path: Path) -> None:
    """A CLI at (or past) the backend's minimum is offered with its version."""
    backend = AcpBackend(GEMINI, fake_cli(tmp_path, GEMINI.min_version))
    assert await detect([backend]) == {"gemini": GEMINI.min_version}


def test_acp_agents_are_candidates_under_multica_names(tmp_path: Path) -> None:
    """OpenCode, Gemini CLI and Hermes are offered under their runtime types, as configured."""
    settings = Settings.from_env(
        {"HOME": str(tmp_path), "MULTICA_OPENCODE_PATH": "/opt/oc", "MULTICA_GEMINI_ARGS": "-d"}
    )
    found = {b.name: b for b in candidates(settings)}
    assert {"opencode", "gemini", "hermes"} <= set(found)
    opencode, gemini = found["opencode"], found["gemini"]
    assert isinstance(opencode, AcpBackend) and opencode.path == "/opt/oc"
    assert isinstance(gemini, AcpBackend) and gemini.args == ("-d",)


def test_installed_candidates_are_those_whose_executable_is_found(tmp_path: Path) -> None:
    """Start-up asks only the CLIs whose executable is there (by path or on the PATH), built
    as every candidate is; the others of Multica's CLIs stay in the full list, for later."""
    kimi = tmp_path / "kimi"
    kimi.write_text("#!/bin/sh\necho 1.0.0\n")
    kimi.chmod(0o755)
    env = {
        "HOME": str(tmp_path),
        "MULTICA_KIMI_PATH": str(kimi),
        "MULTICA_CURSOR_PATH": str(kimi),
        "MULTICA_CLAUDE_PATH": str(tmp_path / "absent"),
    }
    settings = Settings.from_env(env)
    everyone = {b.name: b for b in candidates(settings)}
    installed = {b.name: b for b in candidates(settings, installed=True)}
    assert set(installed) == {KIMI.name, "cursor"}
    for name, backend in installed.items():
        assert type(backend) is type(everyone[name])
        assert isinstance(backend, AgentCli) and backend.path == str(kimi)
    assert {"claude", "codex", "omp", "dsh", "deveco"} <= set(everyone)


async def test_an_untested_entry_says_so_when_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A CLI whose entry no test drives is offered, and its log line says it is untested."""
    backend = AcpBackend(KIMI, fake_cli(tmp_path, "1.2.0"))
    with caplog.at_level(logging.INFO, logger="daemon.cli.discovery"):
        assert await detect([backend]) == {"kimi": "1.2.0"}
    (line,) = [r.getMessage() for r in caplog.records if r.name == "daemon.cli.discovery"]
    assert line.startswith("backend kimi: found version 1.2.0 (untested: no CLI available")


def test_copilot_is_a_candidate_as_configured(tmp_path: Path) -> None:
    """The Copilot CLI is offered under Multica's `copilot` type with its settings."""
    settings = Settings.from_env(
        {
            "HOME": str(tmp_path),
            "MULTICA_COPILOT_PATH": "/opt/copilot",
            "MULTICA_COPILOT_ARGS": "-s",
        }
    )
    copilot = {b.name: b for b in candidates(settings)}["copilot"]
    assert isinstance(copilot, CopilotBackend)
    assert (copilot.path, copilot.args, copilot.min_version) == ("/opt/copilot", ("-s",), "1.0.0")


@pytest.mark.parametrize("kind", [PiBackend, QwenBackend])
def test_pi_and_qwen_are_candidates_as_configured(tmp_path: Path, kind: type[AgentCli]) -> None:
    """Pi and Qwen Code are offered under their runtime types with their path, arguments
    and model."""
    var = f"MULTICA_{kind.name.upper()}"
    settings = Settings.from_env(
        {
            "HOME": str(tmp_path),
            f"{var}_PATH": "/opt/agent",
            f"{var}_ARGS": "--flag",
            f"{var}_MODEL": "fake/model",
        }
    )
    (found,) = [b for b in candidates(settings) if b.name == kind.name]
    assert isinstance(found, kind)
    assert (found.path, found.args, found.model) == ("/opt/agent", ("--flag",), "fake/model")


@pytest.mark.parametrize("mode", ["exec", "app-server"])
def test_the_codex_mode_setting_reaches_the_codex_backend(tmp_path: Path, mode: str) -> None:
    """MULTICA_CODEX_MODE picks how the offered Codex backend runs the CLI."""
    settings = Settings.from_env({"HOME": str(tmp_path), "MULTICA_CODEX_MODE": mode})
    (codex,) = [b for b in candidates(settings) if isinstance(b, CodexBackend)]
    assert codex.mode == mode


def test_multicas_other_clis_are_candidates_with_their_commands(tmp_path: Path) -> None:
    """Cursor, CodeBuddy, OpenClaw, Antigravity, DevEco, dsh and omp are offered under their
    runtime types, each looked up by its own command unless a path is configured."""
    settings = Settings.from_env(
        {"HOME": str(tmp_path), "MULTICA_OMP_PATH": "/opt/omp", "MULTICA_CURSOR_MODEL": "gpt-5"}
    )
    found = {b.name: b for b in candidates(settings)}
    paths = {name: getattr(found[name], "path", None) for name in (
        "cursor", "codebuddy", "openclaw", "antigravity", "deveco", "dsh", "omp",
    )}  # fmt: skip
    assert paths == {
        "cursor": "cursor-agent",
        "codebuddy": "codebuddy",
        "openclaw": "openclaw",
        "antigravity": "agy",
        "deveco": "deveco",
        "dsh": "dsh",
        "omp": "/opt/omp",
    }
    assert getattr(found["cursor"], "model", "") == "gpt-5"


def agents_folder(tmp: Path, user: AgentUser) -> Path:
    """A folder of the agent user's own, as its `npm install -g` prefix would be."""
    folder = tmp / "agent-prefix"
    folder.mkdir(0o755)
    os.chown(folder, user.uid, user.gid)
    return folder


@pytest.mark.root
async def test_a_cli_the_agent_user_can_rewrite_is_never_run_and_not_offered(
    passable_tmp: Path, agent_user: AgentUser, caplog: pytest.LogCaptureFixture
) -> None:
    """An ACP CLI (OpenCode) and another (Claude Code) in a folder the agent user writes,
    rewritten by that user: with MULTICA_AGENT_USER neither is run (least of all as root)
    nor offered, and one line each names the folder and why."""
    folder = agents_folder(passable_tmp, agent_user)
    opencode = plant_cli(folder / "opencode", "1.18.33", agent_user)
    claude = plant_cli(folder / "claude", "2.1.332 (Claude Code)", agent_user)
    env = {
        "HOME": str(passable_tmp),
        "MULTICA_AGENT_USER": agent_user.name,
        "MULTICA_OPENCODE_PATH": str(opencode),
        "MULTICA_CLAUDE_PATH": str(claude),
    }
    backends = [b for b in candidates(Settings.from_env(env)) if b.name in ("opencode", "claude")]
    with caplog.at_level(logging.INFO, logger="daemon.cli.discovery"):
        found = await detect(backends)
    assert 0 not in euids_of(folder), "root ran a CLI the agent user wrote"
    assert euids_of(folder) == [] and found == {}
    why = f"{folder} is owned by uid {agent_user.uid} ({agent_user.name}), not root"
    lines = sorted(r.getMessage() for r in caplog.records if r.name == "daemon.cli.discovery")
    assert lines == [
        f"backend claude: refused, not offered: {why}",
        f"backend opencode: refused, not offered: {why}",
    ]


@pytest.mark.root
async def test_every_cli_is_asked_for_its_version_as_the_agent_user(
    passable_tmp: Path, agent_user: AgentUser
) -> None:
    """A root-owned ACP CLI and a root-owned other one are probed as the agent user, never
    as root."""
    folder = passable_tmp / "prefix"
    folder.mkdir(0o777)  # the runs of both note their uid here
    for name, version in (("opencode", "1.18.33"), ("claude", "2.1.332 (Claude Code)")):
        cli = folder / name
        cli.write_text(recording_cli(version))
        cli.chmod(0o755)
    folder.chmod(0o1777)  # sticky: only root may replace its entries
    env = {
        "HOME": str(passable_tmp),
        "MULTICA_AGENT_USER": agent_user.name,
        "MULTICA_OPENCODE_PATH": str(folder / "opencode"),
        "MULTICA_CLAUDE_PATH": str(folder / "claude"),
    }
    backends = [b for b in candidates(Settings.from_env(env)) if b.name in ("opencode", "claude")]
    assert await detect(backends) == {"opencode": "1.18.33", "claude": "2.1.332 (Claude Code)"}
    assert euids_of(folder) == [agent_user.uid, agent_user.uid]
