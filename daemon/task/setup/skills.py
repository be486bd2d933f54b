"""An agent's inline skills, written where its CLI discovers them (Go `writeSkillFiles`).

Claude Code reads project skills from `<work dir>/.claude/skills/<name>/SKILL.md`, Copilot CLI
from `.github/skills/`, the ACP agents from their own folders (`.kimi/skills/`, …); Codex from
its per-task home's `skills/` (codex_home.py); other backends get Multica's default place,
`.agent_context/skills/`. Names become directory names
(lower case, `-` for anything else), two skills never share a directory, and a supporting
file's path never leaves its skill's directory (nor follows a link the agent left).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from daemon.boundary.beneath import Owner, UnsafePathError, relative_parts, write_under
from daemon.protocol.models import Skill

log = logging.getLogger(__name__)

_SKILLS_DIR = {
    "claude": ".claude/skills",
    "copilot": ".github/skills",
    # The ACP agents' own project skill folders, as Multica writes them (untested here).
    "kimi": ".kimi/skills",
    "kiro": ".kiro/skills",
    "qoder": ".qoder/skills",
    "qoderclicn": ".qoder/skills",
    "traecli": ".traecli/skills",
    "grok": ".grok/skills",
    "qwenpaw": "skill_pool",
    "mcode": ".minimax/skills",
    "reasonix": ".reasonix/skills",
    # Multica's other CLIs, each where it discovers project skills (OpenClaw: its workspace's
    # `skills/`; Antigravity: the shared `.agents/skills/`).
    "cursor": ".cursor/skills",
    "codebuddy": ".codebuddy/skills",
    "openclaw": "skills",
    "antigravity": ".agents/skills",
    "deveco": ".deveco/skills",
    "dsh": ".dsh/skills",
    "omp": ".omp/skills",
}
DEFAULT_SKILLS_DIR = ".agent_context/skills"
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
FILE_LIMIT = 1024 * 1024
"""Bytes of one skill file (`SKILL.md` or a supporting file); a larger one is not written."""
_NAME_ATTEMPTS = 64
TASK_LIMIT = 8 * 1024 * 1024
"""Bytes of skill files written for one task; the files past it are not written."""


class _Budget:
    """What one task may still write; says once per skipped file why it was skipped."""

    def __init__(self) -> None:
        self.left = TASK_LIMIT

    def take(self, skill: str, name: str, text: str) -> bool:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > FILE_LIMIT or size > self.left:
            cap = "per file" if size > FILE_LIMIT else "per task"
            log.warning(
                "skill %s: %s not written: %d bytes is past the %s cap", skill, name, size, cap
            )
            return False
        self.left -= size
        return True


def skills_dir(backend: str) -> str:
    """Where the backend's CLI looks for project skills, relative to the work directory."""
    return _SKILLS_DIR.get(backend, DEFAULT_SKILLS_DIR)


def skill_slug(name: str) -> str:
    """A skill name as a directory name: lower case, runs of other characters as one `-`."""
    return _NOT_ALNUM.sub("-", name.strip().lower()).strip("-")[:64].strip("-") or "skill"


def skill_text(skill: Skill, slug: str) -> str:
    """`SKILL.md`: the content as sent, with a front matter naming the skill when it has none."""
    if skill.content.startswith("---"):
        return skill.content
    description = " ".join(skill.description.split()).replace("\\", "\\\\").replace('"', '\\"')
    head = f"---\nname: {slug}\n" + (f'description: "{description}"\n' if description else "")
    return head + "---\n\n" + skill.content


def write_skills(
    work_dir: Path, backend: str, skills: list[Skill], owner: Owner | None = None
) -> list[Path]:
    """Write every skill under the backend's skills directory; return the `SKILL.md` paths."""
    return write_skill_tree(work_dir, skills_dir(backend), skills, owner)


def write_skill_tree(
    root: Path,
    base: str,
    skills: list[Skill],
    owner: Owner | None = None,
    *,
    put: Callable[[str, str], Path] | None = None,
    taken: Callable[[str], bool] | None = None,
) -> list[Path]:
    """Write every skill as `root/base/<slug>/SKILL.md` plus its files; the `SKILL.md` paths.

    `put(path, text)` writes one file instead of `write_under`; `taken(path)` says a skill's
    directory already exists and is someone else's (a user's folder): the skill then takes
    the next of Go's names (`<slug>-multica`, `<slug>-multica-2`, ...)."""
    written: list[Path] = []
    used: set[str] = set()
    budget = _Budget()
    write = put or (lambda path, text: write_under(root, path, text, owner=owner))
    for skill in skills:
        slug = skill_slug(skill.name)
        unique = _free_name(slug, used, base, taken)
        used.add(unique)
        text = skill_text(skill, unique)
        if not budget.take(unique, "SKILL.md", text):
            continue  # its supporting files are of no use without it
        written.append(write(f"{base}/{unique}/SKILL.md", text))
        for item in skill.files:
            try:
                parts = relative_parts(item.path)
            except UnsafePathError:
                log.warning("skill %s: skipping file outside the skill: %r", unique, item.path)
                continue
            if parts == ("SKILL.md",):
                continue  # the content above is the skill; a copy in its files must not win
            if not budget.take(unique, repr("/".join(parts))[:80], item.content):
                continue
            write("/".join((base, unique, *parts)), item.content)
    return written


def _free_name(slug: str, used: set[str], base: str, taken: Callable[[str], bool] | None) -> str:
    if taken is None:
        n, unique = 2, slug
        while unique in used:
            unique, n = f"{slug}-{n}", n + 1
        return unique
    for attempt in range(_NAME_ATTEMPTS):
        unique = (
            slug
            if attempt == 0
            else f"{slug}-multica"
            if attempt == 1
            else (f"{slug}-multica-{attempt}")
        )
        if unique not in used and not taken(f"{base}/{unique}"):
            return unique
    raise OSError(f"no free directory for skill {slug!r} under {base}")
