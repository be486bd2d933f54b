"""The runtime's own skills an agent turned off, hidden from its CLI for the task, as Multica
hides them (`disabled_runtime_skills`).

Only Claude Code and Codex can be told (the list marks their skills `can_disable`):

    Claude Code   a settings file given with `--settings`: `skillOverrides` turns each user or
                  shared skill off by name, and `permissions.deny` refuses `Skill(<name>)` —
                  the only hold on a plugin's skill (`<plugin>:<skill>`), which ignores
                  overrides
    Codex         a `[[skills.config]]` entry with `enabled = false` per skill, in the task's
                  `config.toml`: the skill's `SKILL.md` under the task's Codex home (where the
                  user's skills are linked) or under `~/.agents/skills`

An entry of another runtime or provider is not this task's; a key that leaves its root is
ignored; a skill the task was given under the same name is the task's, and stays on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from daemon.protocol.models import DisabledRuntimeSkill, Task
from daemon.task.setup.skills import skill_slug

SETTINGS_FILE = "claude-runtime-skill-settings.json"


def disabled_for(task: Task, backend: str) -> list[DisabledRuntimeSkill]:
    """The task agent's disabled skills that belong to this runtime and provider."""
    return [
        s
        for s in task.agent.disabled_runtime_skills
        if s.runtime_id == task.runtime_id and s.provider == backend and _clean(s.key)
    ]


def claude_settings(
    disabled: Iterable[DisabledRuntimeSkill], given: Iterable[str]
) -> dict[str, Any] | None:
    """Claude Code's settings that hide `disabled` (None when nothing is left to hide);
    `given` names the task's own skills, which win a name."""
    claimed = {skill_slug(n) for n in given}
    overrides: dict[str, str] = {}
    deny: list[str] = []
    for skill in disabled:
        key = _clean(skill.key)
        name = skill.name.strip() or key.rsplit("/", 1)[-1]
        if skill_slug(name) in claimed:
            continue
        if skill.root == "plugin":
            name = key
        else:
            overrides[name] = "off"
        for rule in (f"Skill({name})", f"Skill({name} *)"):
            if rule not in deny:
                deny.append(rule)
    if not deny:
        return None
    return {"skillOverrides": overrides, "permissions": {"deny": deny}}


def codex_disabled_paths(
    disabled: Iterable[DisabledRuntimeSkill], codex_home: Path, home: str, given: Iterable[str]
) -> list[str]:
    """The `SKILL.md` of each disabled Codex skill, for `[[skills.config]]`; `home` is the
    user's (the shared root's), `given` the task's own skill names."""
    claimed = {skill_slug(n) for n in given}
    paths: list[str] = []
    for skill in disabled:
        key = _clean(skill.key)
        if skill.root == "provider":
            if skill_slug(key.split("/", 1)[0]) in claimed:
                continue
            path = os.path.join(codex_home, "skills", *key.split("/"), "SKILL.md")
        elif skill.root == "universal" and home:
            path = os.path.join(home, ".agents", "skills", *key.split("/"), "SKILL.md")
        else:
            continue
        if path not in paths:
            paths.append(path)
    return paths


def _clean(key: str) -> str:
    """The key, normalised, or "" when it is empty or leaves its root."""
    cleaned = os.path.normpath(key.strip()) if key.strip() else ""
    if cleaned in ("", ".", "..") or cleaned.startswith(("/", "../")):
        return ""
    return cleaned
