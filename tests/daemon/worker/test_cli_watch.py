"""Agent CLIs replaced under a running daemon: a stat per check, `--version` only for a changed
executable, and a new version registered again in every workspace, failures retried; with an
agent user, a replacement anyone but root could change is refused and never run."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import daemon
from backends.base import Backend
from backends.process.identity import AgentUser
from daemon.cli.discovery import available, candidates, detect
from daemon.config import Settings
from daemon.protocol.client import ServerClient, make_http_client
from daemon.worker.cli_watch import CliWatch, Finder
from daemon.worker.registration import Registration
from tests.fakes.agent_cli import asked_of, euids_of, plant_cli, recording_cli, write_cli
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import daemon_env

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def watching(
    home: Path, cli: Path, **more: str
) -> AsyncIterator[tuple[MulticaFake, Registration, CliWatch, dict[str, tuple[Backend, str]]]]:
    """A fake server, the `claude` at `cli` detected and registered, and a watch over it
    (`more`: settings of other CLIs)."""
    env = {"MULTICA_CLAUDE_PATH": str(cli), "MULTICA_SCRIPTED_BACKEND": "0", **more}
    async with multica_server() as fake:
        settings = Settings.from_env(daemon_env(home, fake.url, **env))
        async with make_http_client(fake.url, settings.token, daemon.__version__) as http:
            backends = dict(await available(settings))
            registration = Registration(ServerClient(http), settings, backends, "d1")
            await registration.register_when_reachable()
            finder = Finder(functools.partial(candidates, settings), detect)
            watch = CliWatch(backends, registration, 0, finder=finder)
            yield fake, registration, watch, backends


def registered_versions(fake: MulticaFake) -> list[str]:
    return [r.body["runtimes"][0]["version"] for r in fake.seen("register")]


async def test_an_unchanged_executable_is_not_run(tmp_path: Path) -> None:
    """Checks of a CLI nobody touched ask it nothing and register nothing."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    async with watching(tmp_path, cli) as (fake, _, watch, _):
        asked = asked_of(cli)
        for _ in range(3):
            assert await watch.check() == []
        assert asked_of(cli) == asked
        assert len(fake.seen("register")) == 1


async def test_a_replaced_cli_reports_its_new_version(tmp_path: Path) -> None:
    """An upgrade in place: asked once, its new version kept and registered again, the same
    runtime on the server."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    async with watching(tmp_path, cli) as (fake, registration, watch, backends):
        before = registration.runtime_ids()
        asked = asked_of(cli)
        write_cli(cli, "2.1.400 (Claude Code)")
        assert await watch.check() == ["claude"]
        assert await watch.check() == []
        assert asked_of(cli) == asked + 1
        assert backends["claude"][1] == "2.1.400 (Claude Code)"
        versions = registered_versions(fake)
        assert len(versions) == 2 and "2.1.328" in versions[0] and "2.1.400" in versions[1]
        assert registration.runtime_ids() == before


async def test_a_replacement_with_the_same_version_registers_nothing(tmp_path: Path) -> None:
    """A reinstall of the same version is asked once and left at that."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    async with watching(tmp_path, cli) as (fake, _, watch, _):
        write_cli(cli, "2.1.328 (Claude Code)")
        assert await watch.check() == []
        assert len(fake.seen("register")) == 1


async def test_a_cli_that_gives_no_version_keeps_the_last_one(tmp_path: Path) -> None:
    """A failed `--version` is no version change: the old one stays, nothing is registered."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    async with watching(tmp_path, cli) as (fake, _, watch, backends):
        write_cli(cli, "")
        assert await watch.check() == []
        assert backends["claude"][1] == "2.1.328 (Claude Code)"
        assert len(fake.seen("register")) == 1


async def test_a_refused_register_of_a_new_version_is_retried(tmp_path: Path) -> None:
    """The server refuses the register that carries the new version: the next check, with
    nothing changed on disk, registers it."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    async with watching(tmp_path, cli) as (fake, _, watch, _):
        fake.refused_registers.add(fake.workspace_id)
        write_cli(cli, "2.1.400 (Claude Code)")
        assert await watch.check() == ["claude"]
        fake.refused_registers.clear()
        await watch.check()
        assert "2.1.400" in registered_versions(fake)[-1]
        assert len(fake.seen("register")) == 3


@pytest.mark.root
async def test_a_cli_repointed_to_one_the_agent_user_writes_is_refused_unrun(
    passable_tmp: Path, agent_user: AgentUser, caplog: pytest.LogCaptureFixture
) -> None:
    """With an agent user, an ACP CLI (OpenCode) whose link is repointed to a copy the agent
    user wrote in its own folder is refused at the next check: nothing is run, least of all
    as root, and its version stays."""
    trusted = passable_tmp / "lib"
    trusted.mkdir(0o755)
    (trusted / "opencode").write_text(recording_cli("1.18.33"))
    (trusted / "opencode").chmod(0o755)
    link = passable_tmp / "opencode"
    link.symlink_to(trusted / "opencode")
    folder = passable_tmp / "agent-prefix"
    folder.mkdir(0o755)
    os.chown(folder, agent_user.uid, agent_user.gid)
    planted = plant_cli(folder / "opencode", "1.99.0", agent_user)
    env = {
        "MULTICA_OPENCODE_PATH": str(link),
        "MULTICA_AGENT_USER": agent_user.name,
        "MULTICA_SCRIPTED_BACKEND": "0",
    }
    async with multica_server() as fake:
        settings = Settings.from_env(daemon_env(passable_tmp, fake.url, **env))
        async with make_http_client(fake.url, settings.token, daemon.__version__) as http:
            backends = dict(await available(settings))
            assert backends["opencode"][1] == "1.18.33"
            registration = Registration(ServerClient(http), settings, backends, "d1")
            await registration.register_when_reachable()
            watch = CliWatch(backends, registration, 0)
            link.unlink()
            link.symlink_to(planted)  # the operator's mistake, or a link the agent could swap
            with caplog.at_level(logging.WARNING, logger="daemon.worker.cli_watch"):
                assert await watch.check() == []
    assert 0 not in euids_of(folder), "root ran a CLI the agent user wrote"
    assert euids_of(folder) == [] and backends["opencode"][1] == "1.18.33"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "daemon.worker.cli_watch"]
    why = f"{folder} is owned by uid {agent_user.uid} ({agent_user.name}), not root"
    assert line == f"backend opencode: executable {planted} changed and is refused: {why}"


async def test_a_cli_gone_twice_in_a_row_is_dropped_and_found_again(tmp_path: Path) -> None:
    """The only CLI's executable missing at one check is left alone (an upgrade may be
    between unlink and link); missing at the next, its runtime is taken offline, saying so,
    and the workspace keeps no runtime; reinstalled, it is found and registered again."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    async with watching(tmp_path, cli) as (fake, registration, watch, backends):
        (runtime,) = fake.live_runtimes()
        cli.unlink()
        assert await watch.check() == []
        assert runtime.status == "online" and "claude" in backends
        assert await watch.check() == ["claude"]
        assert (runtime.status, registration.runtimes, backends) == ("offline", [], {})
        assert runtime.offline_reason == {
            "code": "not_installed",
            "detail": f"claude: {cli} is no longer installed",
        }
        write_cli(cli, "2.1.332 (Claude Code)")
        assert await watch.check() == ["claude"]
        assert runtime.status == "online"
        assert registration.runtime_ids() == [runtime.id]
        assert backends["claude"][1] == "2.1.332 (Claude Code)"


async def test_a_cli_start_up_did_not_offer_is_not_asked_again_until_it_changes(
    tmp_path: Path,
) -> None:
    """A CLI there at the start that start-up detection did not offer (its probe failed) is
    not asked again by the watch's checks, only once its executable changes."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    other = write_cli(tmp_path / "codex", "")
    async with watching(tmp_path, cli, MULTICA_CODEX_PATH=str(other)) as (_, _, watch, backends):
        assert asked_of(other) == 1 and "codex" not in backends
        for _ in range(3):
            assert await watch.check() == []
        assert asked_of(other) == 1
        write_cli(other, "codex-cli 0.171.0")
        assert await watch.check() == ["codex"]
        assert asked_of(other) == 2


async def test_a_cli_whose_probe_fails_is_not_asked_again_until_it_changes(
    tmp_path: Path,
) -> None:
    """A CLI installed after the start that gives no version is asked once, not at every
    check, and again once its executable changes."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    async with watching(tmp_path, cli) as (fake, registration, watch, backends):
        other = tmp_path / "no-codex"
        write_cli(other, "")
        for _ in range(3):
            assert await watch.check() == []
        assert asked_of(other) == 1
        write_cli(other, "codex-cli 0.171.0")
        assert await watch.check() == ["codex"]
        assert asked_of(other) == 2
        assert sorted(r.provider for r in fake.live_runtimes()) == ["claude", "codex"]
        assert sorted(backends) == ["claude", "codex"]
        assert len(registration.runtimes) == 2
