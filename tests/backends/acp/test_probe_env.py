"""The `--version` probe's own variables: Gemini CLI is asked not to start itself twice."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from backends.acp import AcpBackend
from backends.gemini import GEMINI
from backends.opencode import OPENCODE
from daemon.testing import run_spec, settings_in, task

pytestmark = pytest.mark.anyio

RELAUNCH = "GEMINI_CLI_NO_RELAUNCH"


def recording_cli(tmp_path: Path) -> tuple[Path, Path]:
    """A CLI that answers `--version` and writes down the relaunch variable it was given."""
    seen = tmp_path / "seen"
    cli = tmp_path / "gemini"
    cli.write_text(
        f"#!{sys.executable}\n"
        "import os\n"
        f"open({str(seen)!r}, 'w').write(os.environ.get({RELAUNCH!r}, 'unset'))\n"
        "print('0.61.0')\n"
    )
    cli.chmod(0o755)
    return cli, seen


async def test_the_gemini_probe_asks_the_cli_not_to_relaunch_itself(tmp_path: Path) -> None:
    """Gemini CLI starts a second Node process before it reads `--version` unless the
    variable says not to: the probe sets it, and still reads the version."""
    cli, seen = recording_cli(tmp_path)
    assert await AcpBackend(GEMINI, str(cli)).detect() == "0.61.0"
    assert seen.read_text() == "true"


async def test_only_the_probe_gets_it(tmp_path: Path) -> None:
    """A task's run keeps the CLI's relaunch (its larger heap); other CLIs' probes are not
    given Gemini's variable."""
    cli, seen = recording_cli(tmp_path)
    assert await AcpBackend(OPENCODE, str(cli)).detect() == "0.61.0"
    assert seen.read_text() == "unset"
    spec = run_spec(task("hi"), tmp_path, settings_in(tmp_path))
    assert RELAUNCH not in AcpBackend(GEMINI, str(cli)).env(spec)
