"""A user skill the agent turned off is hidden from the real Claude Code: the settings file
the daemon writes (daemon/local_skills/disabled.py) keeps it out of what the model is told,
while the user's other skills stay listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.base import RunSpec, RunStatus
from backends.claude import ClaudeBackend
from daemon.local_skills.disabled import claude_settings
from daemon.protocol.models import DisabledRuntimeSkill
from tests.backends.support import drain
from tests.fakes.anthropic_api import Text, claude_env, fake_anthropic
from tests.fakes.real_cli import InstalledCli

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

SKILLS = ("alpha-turned-off", "beta-kept-on")


async def test_a_disabled_user_skill_never_reaches_the_model(
    claude_cli: InstalledCli, tmp_path: Path
) -> None:
    """Two skills in `~/.claude/skills`; with the settings for the first turned off, only the
    second is in the requests Claude Code makes (without them, both are)."""
    home = tmp_path / "home"
    for name in SKILLS:
        folder = home / ".claude" / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Does {name}.\n---\nGo.\n"
        )
    off = DisabledRuntimeSkill(runtime_id="r", provider="claude", root="provider", key=SKILLS[0])
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(claude_settings([off], [])))
    work = tmp_path / "work"
    work.mkdir()
    seen = []
    for settings_file in (None, settings):
        async with fake_anthropic([Text("Done.")]) as api:
            env = claude_env(api.url, home)
            spec = RunSpec(prompt="Hi.", workdir=work, env=env, settings_file=settings_file)
            async with ClaudeBackend(claude_cli.path).start(spec) as run:
                await drain(run, 120)
                assert (await run.result()).status is RunStatus.COMPLETED
            sent = json.dumps([r.body for r in api.requests])
            seen.append([name in sent for name in SKILLS])
    assert seen == [[True, True], [False, True]]
