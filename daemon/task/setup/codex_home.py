"""Codex's own home per task (`CODEX_HOME`), so the skills the task was given reach it.

Codex finds skills only in its home, never in the work directory, so each Codex task gets
`<task dir>/codex-home/`, made from the user's home (`$CODEX_HOME`, else `~/.codex`) as
Multica's daemon makes it (`execenv/codex_home.go`):

    auth.json                          a link to the user's: a refreshed login reaches every task
    config.toml config.json            copies (model, provider): a task's changes stay its own
    instructions.md
    sessions/                          a link to the user's sessions: a thread started in one
                                       task dir resumes from any other (see README)
    skills/<user skill>                a link to each of the user's own skills
    skills/<slug>/SKILL.md ...         the task's skills, written like inline skills elsewhere;
                                       on a name clash the task's skill wins

A reused task directory gets its home refreshed: copies again, links again, skills rewritten.
Everything is written without following a link an agent may have left in the task directory.
The GC and disk-usage never follow the links, so a removed task takes none of the user's files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from backends.codex.backend import CodexBackend, codex_home
from daemon.files.beneath import Owner, ensure_dir_under, write_under
from daemon.protocol.models import Skill
from daemon.task.setup.skills import skill_slug, write_skill_tree

log = logging.getLogger(__name__)

CODEX = CodexBackend.name
HOME_DIR = "codex-home"
LINKED = ("auth.json", "sessions")
COPIED = ("config.json", "config.toml", "instructions.md")
SKILLS = "skills"
_COPY_LIMIT = 4 * 1024 * 1024


def user_codex_home(base_env: Mapping[str, str]) -> Path:
    """The user's own Codex home, as the daemon's environment names it."""
    return codex_home(base_env)


def prepare_codex_home(
    env_root: Path, user_home: Path, skills: list[Skill], owner: Owner | None = None
) -> Path:
    """Make (or refresh) the task's Codex home from `user_home`; return its path. With `owner`
    (an agent user's uid and gid) the home and what is written in it are that user's."""
    home = env_root / HOME_DIR
    if home.is_symlink() or (home.exists() and not home.is_dir()):
        home.unlink()  # left by an agent: the home is never reached through a link
    ensure_dir_under(env_root, HOME_DIR, owner=owner)
    if user_home.is_dir() and not (user_home / "sessions").exists():
        # Codex would make it on its first run; made now, so the first task's thread is there
        # for the next task to resume (not through a link: then the task keeps its own).
        with contextlib.suppress(OSError):
            ensure_dir_under(user_home, "sessions", owner=owner)
    for name in LINKED:
        _link(home / name, user_home / name, owner)
    if not (home / "sessions").exists():
        ensure_dir_under(home, "sessions", owner=owner)  # no user home at all: its own
    for name in COPIED:
        _copy(user_home / name, home, name, owner)
    _skills(home, user_home / SKILLS, skills, owner)
    return home


def _link(at: Path, target: Path, owner: Owner | None) -> None:
    """`at` as a link to `target` when it exists; whatever stood at `at` is replaced."""
    _remove(at)
    if target.exists():
        at.symlink_to(target)
        if owner is not None:
            os.lchown(at, *owner)


def _copy(source: Path, home: Path, name: str, owner: Owner | None) -> None:
    _remove(home / name)
    try:
        with source.open("rb") as handle:
            data = handle.read(_COPY_LIMIT)
    except OSError:
        return  # the user has none
    write_under(home, name, data, owner=owner)


def _skills(home: Path, user_skills: Path, skills: list[Skill], owner: Owner | None) -> None:
    """The user's skills as links, then the task's written over any clash."""
    _remove(home / SKILLS)
    ensure_dir_under(home, SKILLS, owner=owner)
    taken = {skill_slug(s.name) for s in skills}
    with contextlib.suppress(OSError):
        for entry in sorted(user_skills.iterdir()):
            if entry.is_dir() and entry.name not in taken and not entry.name.startswith("."):
                _link(home / SKILLS / entry.name, entry, owner)
    write_skill_tree(home, SKILLS, skills, owner)


def _remove(path: Path) -> None:
    """Remove a file, a link (never its target) or a directory tree at `path`, if any."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
