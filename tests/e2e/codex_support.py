"""A daemon whose only backend is the real Codex CLI, pointed at a fake OpenAI API: the
`exec` tests and the `app-server` tests differ only in the mode they set."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.fakes.openai_api import FakeOpenAI, codex_env, codex_home
from tests.fakes.openai_api import fake_openai as fake_api
from tests.fakes.real_cli import InstalledCli
from tests.helpers import RunningDaemon, cli_daemon


@asynccontextmanager
async def codex_daemon(
    cli: InstalledCli, tmp_path: Path, script: list[Any], window: str = "2s", **env: str
) -> AsyncIterator[tuple[RunningDaemon, FakeOpenAI]]:
    """The daemon running `cli` and the fake, `script` its answers, `window` the idle
    watchdog's, `env` more of the daemon's settings (`MULTICA_CODEX_MODE`)."""
    async with fake_api(script) as api:
        agent_env = codex_env(tmp_path / "home", codex_home(tmp_path / "codex-home", api.url))
        async with cli_daemon(
            tmp_path,
            agent_env,
            MULTICA_CODEX_PATH=cli.path,
            MULTICA_AGENT_IDLE_WATCHDOG=window,
            **env,
        ) as d:
            yield d, api
