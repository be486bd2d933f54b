"""The runtime's own skills an agent turned off are hidden from Claude Code (a settings file
on `--settings`) and from Codex (`[[skills.config]]` off in the task's config), and only
those of the task's runtime."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from backends.base import NullObserver
from backends.claude import ClaudeBackend
from daemon.config import Settings
from daemon.local_skills.disabled import claude_settings, codex_disabled_paths, disabled_for
from daemon.protocol.models import DisabledRuntimeSkill, Task
from daemon.services import AgentReach
from daemon.task.setup.spec import agent_spec, prepare

RUNTIME = "rt-1"


def off(key: str, root: str = "provider", provider: str = "claude", **more: str) -> dict[str, Any]:
    return {"runtime_id": RUNTIME, "provider": provider, "root": root, "key": key, **more}


def task(disabled: list[dict[str, Any]], skills: list[dict[str, Any]] | None = None) -> Task:
    return Task.model_validate(
        {
            "id": "task-1",
            "workspace_id": "ws-1",
            "agent_id": "ag-1",
            "runtime_id": RUNTIME,
            "issue_id": "I-1",
            "agent": {"id": "ag-1", "disabled_runtime_skills": disabled, "skills": skills or []},
            "auth_token": "mat_task_secret",
        }
    )


def test_only_this_runtimes_and_providers_entries_count() -> None:
    """Another runtime's, another provider's, a key leaving its root, a non-object: ignored."""
    given = task(
        [
            off("a"),
            {**off("b"), "runtime_id": "rt-2"},
            off("c", provider="codex"),
            off("../etc"),
            "junk",  # type: ignore[list-item]
        ]
    )
    assert [s.key for s in disabled_for(given, "claude")] == ["a"]


def test_claude_hides_skills_by_name_and_denies_plugin_skills() -> None:
    """Overrides for user and shared skills, a deny rule (bare and with arguments) for each,
    a plugin skill by its key; the task's own skill of the same name stays on."""
    skills = [
        DisabledRuntimeSkill(**off("review", name="Review")),
        DisabledRuntimeSkill(**off("team/deploy", root="universal")),
        DisabledRuntimeSkill(**off("paper:design", root="plugin", plugin="paper@m")),
        DisabledRuntimeSkill(**off("lint")),
    ]
    assert claude_settings(skills, ["Lint"]) == {
        "skillOverrides": {"Review": "off", "deploy": "off"},
        "permissions": {
            "deny": [
                "Skill(Review)", "Skill(Review *)", "Skill(deploy)", "Skill(deploy *)",
                "Skill(paper:design)", "Skill(paper:design *)",
            ]
        },
    }  # fmt: skip
    assert claude_settings([DisabledRuntimeSkill(**off("lint"))], ["lint"]) is None


def test_codex_hides_the_skill_files_of_its_home_and_the_shared_root(tmp_path: Path) -> None:
    """The provider root's skills are the task home's links; the shared one is the user's."""
    skills = [
        DisabledRuntimeSkill(**off("fmt", provider="codex")),
        DisabledRuntimeSkill(**off("x/y", root="universal", provider="codex")),
        DisabledRuntimeSkill(**off("p:q", root="plugin", provider="codex")),
    ]
    assert codex_disabled_paths(skills, tmp_path / "ch", "/home/u", []) == [
        f"{tmp_path}/ch/skills/fmt/SKILL.md",
        "/home/u/.agents/skills/x/y/SKILL.md",
    ]


def spec_for(tmp_path: Path, backend: str, given: Task):  # type: ignore[no-untyped-def]
    settings = Settings.from_env({"HOME": str(tmp_path), "MULTICA_SERVER_URL": "http://x.test"})
    dirs, mcp = prepare(tmp_path / "ws", given, backend)
    env = {"PATH": "/usr/bin", "HOME": str(tmp_path / "home")}
    reach = AgentReach("http://x.test", env, 19514, None)
    return dirs, agent_spec(
        given, backend, dirs, settings, NullObserver(), mcp, reach, 0, processes=None
    )


def test_a_claude_task_gets_its_settings_file_on_the_command_line(tmp_path: Path) -> None:
    """The file in the task's folder holds the overrides; Claude Code is started with it."""
    dirs, spec = spec_for(tmp_path, "claude", task([off("review")]))
    assert spec.settings_file == dirs.env_root / "claude-runtime-skill-settings.json"
    assert json.loads(spec.settings_file.read_text())["skillOverrides"] == {"review": "off"}
    argv = ClaudeBackend("claude").argv(spec)
    assert argv[argv.index("--settings") + 1] == str(spec.settings_file)
    _, plain = spec_for(tmp_path / "2", "claude", task([]))
    assert plain.settings_file is None and "--settings" not in ClaudeBackend().argv(plain)


def test_a_codex_task_gets_its_skill_turned_off_in_its_config(tmp_path: Path) -> None:
    """`[[skills.config]]` with `enabled = false` for the skill's file in the task's home."""
    _, spec = spec_for(tmp_path, "codex", task([off("fmt", provider="codex")]))
    home = Path(spec.env["CODEX_HOME"])
    config = tomllib.loads((home / "config.toml").read_text())
    assert config["skills"]["config"] == [
        {"path": str(home / "skills" / "fmt" / "SKILL.md"), "enabled": False}
    ]
