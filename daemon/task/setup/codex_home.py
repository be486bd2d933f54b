"""Codex's own home per task (`CODEX_HOME`), so the skills the task was given reach it.

Codex finds skills only in its home, never in the work directory, so each Codex task gets
`<task dir>/codex-home/`, made from the user's home (`$CODEX_HOME`, else `~/.codex`) as
Multica's daemon makes it (`execenv/codex_home.go`):

    auth.json                          a link to the user's: a refreshed login reaches every task
    config.toml                        the user's, with the task's shell environment policy,
                                       memory and sub-agents off (codex_config.py)
    config.json instructions.md        copies (model, provider): a task's changes stay its own
    sessions/                          a link to the user's sessions: a thread started in one
                                       task dir resumes from any other (docs/multica.md)
    skills/<user skill>                a link to each of the user's own skills
    skills/<slug>/SKILL.md ...         the task's skills, written like inline skills elsewhere;
                                       on a name clash the task's skill wins

A reused task directory gets its home refreshed: copies again, links again, skills rewritten.
With an agent user both homes are that user's to change, so everything here goes through
directory handles (daemon/boundary/beneath.py): no link it left is followed, a copy is made only
of a regular file (never a FIFO, which would hang the setup) under a cap, and only of a file
that user could read itself — a `config.toml` linked or hard-linked to a root-only secret is
not handed over. The GC and disk-usage never follow the links, so a removed task takes none
of the user's files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from backends.codex.backend import CodexBackend, codex_home
from daemon.boundary.beneath import (
    Owner,
    ensure_dir_under,
    entries_at,
    link_at,
    opened_at,
    opened_dir,
    read_at,
    remove_at,
    stat_at,
    write_at,
)
from daemon.protocol.models import Skill
from daemon.task.setup.codex_config import task_config
from daemon.task.setup.skills import skill_slug, write_skill_tree

log = logging.getLogger(__name__)

CODEX = CodexBackend.name
HOME_DIR = "codex-home"
SESSIONS = "sessions"
LINKED = ("auth.json", SESSIONS)
CONFIG = "config.toml"
COPIED = ("config.json", "instructions.md")
SKILLS = "skills"
COPY_LIMIT = 4 * 1024 * 1024
"""Bytes of one copied file; a larger one is not copied."""


def user_codex_home(base_env: Mapping[str, str]) -> Path:
    """The user's own Codex home, as the daemon's environment names it."""
    return codex_home(base_env)


def task_codex_home(env_root: Path) -> Path:
    """Where the task's Codex home is (made by `prepare_codex_home`)."""
    return env_root / HOME_DIR


def prepare_codex_home(
    env_root: Path,
    user_home: Path,
    skills: list[Skill],
    owner: Owner | None = None,
    shell: Sequence[str] = (),
    disabled: Sequence[str] = (),
) -> Path:
    """Make (or refresh) the task's Codex home from `user_home`; return its path. With `owner`
    (an agent user's uid and gid) the home and what is written in it are that user's; `shell`
    names the variables Codex's shell tools get (codex_config.py), `disabled` the `SKILL.md`
    of each of the user's skills the agent turned off."""
    # The task's folder sits in the daemon's workspace folder: its path is the anchor.
    with opened_dir(env_root.parent, env_root.name) as task_fd:
        found = stat_at(task_fd, HOME_DIR)
        if found is not None and not stat.S_ISDIR(found.st_mode):
            remove_at(task_fd, HOME_DIR)  # left by an agent: never reached through a link
    home = ensure_dir_under(env_root, HOME_DIR, owner=owner)
    with opened_dir(env_root, HOME_DIR) as home_fd, _source(user_home, owner) as source:
        if source is not None and stat_at(source, "sessions") is None:
            # Codex would make it on its first run; made now, so the first task's thread is
            # there for the next task to resume (not through a link: then the task keeps its own).
            with contextlib.suppress(OSError):
                _mkdir(source, "sessions", owner)
        for name in LINKED:
            remove_at(home_fd, name)
            if source is not None and stat_at(source, name) is not None:
                link_at(home_fd, name, user_home / name, owner)
        if stat_at(home_fd, "sessions") is None:
            _mkdir(home_fd, "sessions", owner)  # no user home at all: its own
        for name in COPIED:
            _copy(source, home_fd, name, owner)
        _config(source, home_fd, owner, shell, disabled)
        _user_skills(home_fd, source, user_home / SKILLS, skills, owner)
    write_skill_tree(home, SKILLS, skills, owner)
    return home


@contextlib.contextmanager
def _source(user_home: Path, owner: Owner | None) -> Iterator[int | None]:
    """A handle of the user's Codex home, None when there is none. An agent user's may not be
    a link (the operator's own may: no one else writes there)."""
    with contextlib.ExitStack() as stack:
        try:
            fd: int | None = stack.enter_context(opened_dir(user_home, follow=owner is None))
        except OSError:
            fd = None
        yield fd


def _mkdir(dir_fd: int, name: str, owner: Owner | None) -> None:
    os.mkdir(name, 0o700, dir_fd=dir_fd)
    if owner is not None:
        os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)


def _copy(source: int | None, home_fd: int, name: str, owner: Owner | None) -> None:
    """A copy of the user's `name`, when it is a regular file they could read themselves."""
    remove_at(home_fd, name)
    data = _read(source, name, owner)
    if data is not None:
        write_at(home_fd, name, data, owner=owner)


def _config(
    source: int | None,
    home_fd: int,
    owner: Owner | None,
    shell: Sequence[str],
    disabled: Sequence[str],
) -> None:
    """The task's config.toml: the user's (or none) as codex_config.py changes it."""
    remove_at(home_fd, CONFIG)
    data = _read(source, CONFIG, owner)
    text = data.decode("utf-8", "replace") if data is not None else ""
    write_at(home_fd, CONFIG, task_config(text, shell, disabled).encode(), owner=owner)


def _read(source: int | None, name: str, owner: Owner | None) -> bytes | None:
    """The user's `name` when it is a regular file they could read themselves, else None."""
    if source is None or stat_at(source, name) is None:
        return None  # the user has none
    try:
        # The operator's own config may be a link (a dotfiles checkout); an agent user's not.
        return read_at(source, name, COPY_LIMIT, readable_by=owner, follow=owner is None)
    except OSError as exc:
        log.warning("codex home: %s not copied: %s", name, exc.strerror or exc)
        return None


def _user_skills(
    home_fd: int, source: int | None, user_skills: Path, skills: list[Skill], owner: Owner | None
) -> None:
    """The user's skills as links (the task's are written over any clash afterwards)."""
    remove_at(home_fd, SKILLS)
    _mkdir(home_fd, SKILLS, owner)
    if source is None:
        return
    taken = {skill_slug(s.name) for s in skills}
    # The operator's own skills may be links (a dotfiles checkout); an agent user's are not
    # followed, even to be judged.
    kinds = (stat.S_ISDIR,) if owner is not None else (stat.S_ISDIR, stat.S_ISLNK)
    with (
        contextlib.suppress(OSError),
        opened_at(source, SKILLS) as listed,
        opened_at(home_fd, SKILLS) as into,
    ):
        for name, info in entries_at(listed):
            if name in taken or name.startswith("."):
                continue
            if any(kind(info.st_mode) for kind in kinds):
                link_at(into, name, user_skills / name, owner)
