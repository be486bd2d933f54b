"""Codex's per-task home: the user's login and config carried over, the task's skills in it."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import pytest

from daemon.protocol.models import Skill
from daemon.task.setup.codex_home import prepare_codex_home


def _user_home(tmp_path: Path) -> Path:
    """A user's ~/.codex with a login, a config, sessions and one skill of their own."""
    home = tmp_path / "user" / ".codex"
    (home / "sessions" / "2026").mkdir(parents=True)
    (home / "auth.json").write_text('{"token": "user-login"}')
    (home / "config.toml").write_text('model = "gpt-test"\n')
    (home / "skills" / "mine").mkdir(parents=True)
    (home / "skills" / "mine" / "SKILL.md").write_text("my own skill")
    (home / "skills" / "deploy").mkdir()
    (home / "skills" / "deploy" / "SKILL.md").write_text("the user's deploy")
    return home


def test_the_home_carries_login_config_sessions_and_skills(tmp_path: Path) -> None:
    """Login and sessions linked, config copied owner-only, user skills linked, the task's
    skills written (winning a name clash)."""
    user = _user_home(tmp_path)
    env_root = tmp_path / "task"
    env_root.mkdir()
    skills = [Skill(name="Deploy", content="the task's deploy")]
    home = prepare_codex_home(env_root, user, skills)
    assert home == env_root / "codex-home"
    assert os.readlink(home / "auth.json") == str(user / "auth.json")
    assert os.readlink(home / "sessions") == str(user / "sessions")
    assert not (home / "config.toml").is_symlink()
    assert _config(home)["model"] == "gpt-test"
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600
    assert os.readlink(home / "skills" / "mine") == str(user / "skills" / "mine")
    assert (home / "skills" / "deploy" / "SKILL.md").read_text().endswith("the task's deploy")
    assert (user / "skills" / "deploy" / "SKILL.md").read_text() == "the user's deploy"


def test_a_link_left_in_place_of_the_home_is_replaced(tmp_path: Path) -> None:
    """An agent that made `codex-home` a link to elsewhere gets nothing there overwritten."""
    user = _user_home(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "skills").mkdir(parents=True)
    (elsewhere / "config.toml").write_text("precious")
    env_root = tmp_path / "task"
    env_root.mkdir()
    (env_root / "codex-home").symlink_to(elsewhere)
    home = prepare_codex_home(env_root, user, [])
    assert not home.is_symlink() and _config(home)["model"] == "gpt-test"
    assert (elsewhere / "config.toml").read_text() == "precious"
    assert (elsewhere / "skills").is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user needs root")
def test_an_agent_users_home_is_theirs(tmp_path: Path) -> None:
    """With an agent user, the home, its copies and the task's skills are that user's."""
    user = _user_home(tmp_path)
    env_root = tmp_path / "task"
    env_root.mkdir()
    owner = (65534, 65534)
    home = prepare_codex_home(env_root, user, [Skill(name="Deploy", content="x")], owner)
    for path in (
        home,
        home / "config.toml",
        home / "skills",
        home / "skills" / "deploy" / "SKILL.md",
    ):
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == owner, path


def test_the_operators_linked_config_is_still_copied(tmp_path: Path) -> None:
    """Without an agent user the home is the operator's: a `config.toml` kept as a link to a
    dotfiles checkout is copied as before."""
    user = _user_home(tmp_path)
    dotfiles = tmp_path / "dotfiles" / "codex.toml"
    dotfiles.parent.mkdir()
    dotfiles.write_text('model = "from-dotfiles"\n')
    (user / "config.toml").unlink()
    (user / "config.toml").symlink_to(dotfiles)
    env_root = tmp_path / "task"
    env_root.mkdir()
    home = prepare_codex_home(env_root, user, [])
    assert _config(home)["model"] == "from-dotfiles"


def _config(home: Path) -> dict[str, Any]:
    return tomllib.loads((home / "config.toml").read_text())
