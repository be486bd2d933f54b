"""The real Codex CLI's shell tools reach Multica: the task's token survives Codex's
KEY/SECRET/TOKEN filter, even where the user's own config turns the filter on, while a
credential of the daemon's own environment stays filtered. Offline, against a fake OpenAI API.

Skipped, with the install command as the reason, only when the CLI is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai_api import Answer, Shell, codex_env, codex_home, fake_openai
from tests.fakes.real_cli import InstalledCli
from tests.helpers import cli_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

# The user's own ~/.codex/config.toml asks for Codex's filter of credential-looking names.
FILTER_ON = "\n[shell_environment_policy]\nignore_default_excludes = false\n"
PROBE = (
    "echo token=${MULTICA_TOKEN:+present} task=${MULTICA_TASK_ID:+present}"
    " daemon_secret=${DAEMON_SECRET_TOKEN:+present}"
)


@pytest.mark.parametrize("mode", ["exec", "app-server"])
async def test_multica_token_reaches_codexs_shell_tools(
    codex_cli: InstalledCli, tmp_path: Path, mode: str
) -> None:
    """A shell command Codex runs sees MULTICA_TOKEN (and the task's other variables), not the
    daemon's own credential."""
    async with fake_openai([Shell(PROBE), Answer("Checked.")]) as api:
        home = codex_home(tmp_path / "codex-home", api.url)
        with (home / "config.toml").open("a") as config:
            config.write(FILTER_ON)
        env = codex_env(tmp_path / "home", home, DAEMON_SECRET_TOKEN="daemon-only")
        settings = {"MULTICA_CODEX_PATH": codex_cli.path, "MULTICA_CODEX_MODE": mode}
        async with cli_daemon(tmp_path, env, **settings) as d:
            task = await d.wait(await d.submit("Check.", backend="codex"), within=90)
            messages = await d.api.messages(task["id"])
    assert task["status"] == "completed", task
    (done,) = [m for m in messages if m["type"] == "tool_result"]
    assert "token=present task=present daemon_secret=\n" in done["output"] + "\n", done
