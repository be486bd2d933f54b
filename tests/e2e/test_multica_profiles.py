"""Custom runtime profiles against the Multica-faithful server: each profile this machine can
run is a runtime of its own (`<name> (<device>)`, its `profile_id`), its tasks and probes run
its command with its fixed arguments first; the others are reported with why; created,
changed and disabled profiles are followed without a restart, a change missed while the
control channel was down included."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.fakes.agent_cli import CLAUDE_ANSWER, runs_of, write_cli
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio

DEVICE = {"MULTICA_DAEMON_DEVICE_NAME": "box", "MULTICA_DAEMON_HEARTBEAT_INTERVAL": "200ms"}
HELP = "  --effort <level>   Effort level for the current session (low, high)"


def pin_paths(home: Path, paths: dict[str, str]) -> None:
    """What `multica runtime profile set-path` writes: the CLI config's per-machine paths."""
    folder = home / ".multica"
    folder.mkdir(mode=0o700, exist_ok=True)
    config = {"server_url": "", "profile_command_overrides": paths}
    (folder / "config.json").write_text(json.dumps(config))
    os.chmod(folder / "config.json", 0o600)


def registered_profiles(fake: MulticaFake) -> list[dict[str, object]]:
    """The profile entries of the last register."""
    body = fake.seen("register")[-1].body
    return [r for r in body["runtimes"] if r.get("profile_id")]


async def test_a_profile_is_a_runtime_of_its_own_that_runs_its_command_with_its_arguments(
    tmp_path: Path,
) -> None:
    """A Claude profile on a wrapper: registered as `Wrapped (box)` with its profile id and the
    version the wrapper gives after its fixed arguments; its task and its model list run the
    wrapper with `start q36` before the daemon's own arguments; a profile of a family the
    daemon does not drive and one whose command is nowhere are reported failed, with why."""
    (tmp_path / "bin").mkdir()
    wrapper = write_cli(
        tmp_path / "bin" / "ccms", "2.1.332 (Claude Code)", CLAUDE_ANSWER, help_text=HELP
    )
    async with multica_server() as fake:
        wrapped = fake.add_profile(
            "Wrapped", "claude", "ccms", ["start", "q36", "--mcp-config", "x"]
        )
        nowhere = fake.add_profile("Nowhere", "codex", "no-such-codex-wrapper")
        foreign = fake.add_profile("Foreign", "nonesuch", "nonesuch")
        pin_paths(tmp_path, {wrapped: str(wrapper), nowhere: str(tmp_path / "not-a-file")})
        async with running_daemon(tmp_path, fake.url, **DEVICE) as d:
            runtime = fake.profile_runtime(wrapped)
            assert runtime is not None and runtime.status == "online"
            (entry,) = registered_profiles(fake)
            assert entry == {
                "name": "Wrapped (box)",
                "type": "claude",
                "version": "2.1.332 (Claude Code)",
                "status": "online",
                "profile_id": wrapped,
            }
            failed = {f["profile_id"]: f for f in fake.seen("register")[-1].body["failed_profiles"]}
            assert failed[foreign]["reason"] == "unsupported protocol_family: nonesuch"
            assert failed[nowhere]["reason"] == (
                f"Configured path override is not executable: {tmp_path / 'not-a-file'}; "
                "command not found on PATH: no-such-codex-wrapper"
            )
            offline = fake.profile_runtime(nowhere)
            assert offline is not None and offline.status == "offline"
            assert offline.failure_reason == failed[nowhere]["reason"]
            # The built-in scripted runtime is there beside it, as before.
            assert {r.provider for r in fake.live_runtimes() if not r.profile_id} == {"scripted"}

            task_id = fake.queue_issue(runtime_id=runtime.id)
            task = await fake.finished(task_id)
            assert (task.status, task.output) == ("completed", "Done.")
            request = fake.request_models(runtime.id)
            await eventually(lambda: any(r["request_id"] == request for r in fake.action_results))
            assert d.worker.registration.runtime(runtime.id) is not None
    (result,) = [r for r in fake.action_results if r["request_id"] == request]
    opus = next(m for m in result["models"] if m["id"] == "claude-opus-4-7")
    assert [lvl["value"] for lvl in opus["thinking"]["supported_levels"]] == ["low", "high"]
    runs = runs_of(wrapper)
    assert ["start", "q36", "--version"] in runs
    assert ["start", "q36", "--help"] in runs
    # The task: the prefix first (the daemon's own `--mcp-config` dropped from it), then
    # Claude Code's arguments.
    (task_run,) = [r for r in runs if "-p" in r]
    assert task_run[:3] == ["start", "q36", "-p"]
    assert "x" not in task_run


async def test_profiles_are_followed_as_they_change_and_after_a_reconnect(tmp_path: Path) -> None:
    """A profile created while the daemon runs is registered at its notice; one disabled is
    taken offline at once; one enabled again while the control channel was down (no notice
    reaches the daemon) is registered when the channel opens again."""
    (tmp_path / "bin").mkdir()
    wrapper = write_cli(tmp_path / "bin" / "ccms", "2.1.332 (Claude Code)", CLAUDE_ANSWER)
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, control=True, **DEVICE) as d,
    ):
        await eventually(lambda: bool(fake.watchers))
        profile = fake.add_profile("Wrapped", "claude", str(wrapper))
        await eventually(lambda: fake.profile_runtime(profile) is not None)
        runtime = fake.profile_runtime(profile)
        assert runtime is not None and runtime.status == "online"
        await eventually(lambda: d.worker.registration.runtime(runtime.id) is not None)

        fake.edit_profile(profile, enabled=False)
        await eventually(lambda: runtime.status == "offline")
        assert d.worker.registration.runtime(runtime.id) is None

        # Enabled while the channel is down: the notice goes to nobody.
        for _, stream in list(fake.watchers):
            stream.close()
        fake.watchers.clear()
        fake.profiles[profile].enabled = True
        await eventually(lambda: d.worker.registration.runtime(runtime.id) is not None, within=30)
        assert runtime.status == "online"
        task_id = fake.queue_issue(runtime_id=runtime.id)
        assert (await fake.finished(task_id)).status == "completed"


async def test_an_older_server_without_profiles_registers_the_rest(tmp_path: Path) -> None:
    """A server without the profiles route (a 404) costs nothing: the daemon registers its
    built-in runtimes and runs their tasks."""
    async with multica_server() as fake:
        fake.profiles_route = False
        async with running_daemon(tmp_path, fake.url):
            (runtime,) = fake.live_runtimes()
            assert fake.seen("runtime-profiles")
            task_id = fake.queue_issue()
            assert (await fake.finished(task_id)).status == "completed"
    assert runtime.provider == "scripted"
