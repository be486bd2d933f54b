"""A custom runtime profile's fixed arguments come first on every command line it runs: each
backend discovery offers builds its runs through the CLI's launch prefix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends.agent_cli import AgentCli
from daemon.cli.discovery import candidates
from daemon.config import Settings
from tests.backends.support import drain, stdin_spec
from tests.fakes.agent_cli import runs_of, write_cli
from tests.helpers import daemon_env

pytestmark = pytest.mark.anyio

PREFIX = ["start", "q36"]


def _clis(home: Path) -> list[AgentCli]:
    env = daemon_env(home, "http://127.0.0.1:9", MULTICA_SCRIPTED_BACKEND="0")
    found = candidates(Settings.from_env(env))
    return [b for b in found if isinstance(b, AgentCli)]


def _names() -> list[str]:
    return [b.name for b in _clis(Path("/nonexistent"))]


@pytest.mark.parametrize("name", _names())
async def test_a_profiles_fixed_arguments_lead_every_run(tmp_path: Path, name: str) -> None:
    """The CLI (a stand-in that notes its arguments and exits) is started with the profile's
    words right after the executable, then the backend's own arguments."""
    (backend,) = [b for b in _clis(tmp_path) if b.name == name]
    cli = write_cli(tmp_path / "wrapper", "1.0.0")
    profiled = backend.for_profile(str(cli), PREFIX)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    async with profiled.start(stdin_spec(env, tmp_path / "work")) as run:
        await drain(run)
    runs = [argv for argv in runs_of(cli) if "--version" not in argv]
    assert runs, f"{name}: the CLI never ran"
    assert all(argv[: len(PREFIX)] == PREFIX for argv in runs), runs
