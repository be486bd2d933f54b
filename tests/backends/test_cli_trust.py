"""Whether an agent CLI is root's to change alone: the file, the directories to it, the links on
the way, its interpreter and the PATH searched before it, as OpenSSH's StrictModes asks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backends.cli_trust import refusal
from backends.process.identity import AgentUser


def executable(path: Path, text: str = "#!/bin/sh\necho 1.0.0\n") -> Path:
    path.parent.mkdir(0o755, parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_cli_only_its_owner_can_write_is_trusted(tmp_path: Path) -> None:
    """A file of the daemon's user, 0755, in directories only it writes: no refusal."""
    assert refusal(str(executable(tmp_path / "bin" / "claude")), "") is None


@pytest.mark.parametrize(
    ("mode", "why"), [(0o775, "writable by its group"), (0o757, "writable by every user")]
)
def test_a_cli_its_group_or_everyone_can_write_is_refused(
    tmp_path: Path, mode: int, why: str
) -> None:
    """The file itself group- or world-writable: refused, naming it and why."""
    cli = executable(tmp_path / "claude")
    cli.chmod(mode)
    said = refusal(str(cli), "")
    assert said is not None and said.startswith(f"{cli} is {why}"), said


def test_a_directory_others_can_write_on_its_path_is_refused(tmp_path: Path) -> None:
    """A writable directory on the way (it could swap the file) is named; a sticky one (/tmp)
    is passed, its entry being the daemon's."""
    shared = tmp_path / "shared"
    cli = executable(shared / "bin" / "claude")
    shared.chmod(0o777)
    assert refusal(str(cli), "") == f"{shared} is writable by every user (mode 0777)"
    shared.chmod(0o1777)
    assert refusal(str(cli), "") is None


def test_a_link_is_judged_where_it_points(tmp_path: Path) -> None:
    """A trusted link into a writable directory is refused for that directory; the link's own
    folder is judged before its target."""
    loose = tmp_path / "loose"
    target = executable(loose / "claude.js")
    loose.chmod(0o777)
    link = tmp_path / "bin" / "claude"
    link.parent.mkdir(0o755)
    link.symlink_to(Path("..") / "loose" / "claude.js")
    assert refusal(str(link), "") == f"{loose} is writable by every user (mode 0777)"
    loose.chmod(0o755)
    assert refusal(str(link), "") is None
    assert target.exists()


def test_the_interpreter_env_finds_on_path_is_judged(tmp_path: Path) -> None:
    """`#!/usr/bin/env fakenode`: `env` and the `fakenode` PATH finds are both judged."""
    tools = tmp_path / "tools"
    executable(tools / "fakenode")
    cli = executable(tmp_path / "bin" / "claude", "#!/usr/bin/env -S fakenode --flag\n")
    assert refusal(str(cli), str(tools)) is None
    tools.chmod(0o777)
    said = refusal(str(cli), str(tools))
    assert said is not None and said.startswith(f"{tools} is writable by every user"), said


def test_an_interpreter_named_by_path_is_judged(tmp_path: Path) -> None:
    """`#!/path/to/python`: that interpreter must be trusted too."""
    python = executable(tmp_path / "py" / "python")
    cli = executable(tmp_path / "claude", f"#!{python}\n")
    assert refusal(str(cli), "") is None
    python.chmod(0o777)
    assert refusal(str(cli), "") == f"{python} is writable by every user (mode 0777)"


def test_a_writable_directory_ahead_on_path_is_refused(tmp_path: Path) -> None:
    """A bare name looked up on PATH: a directory searched before the one that holds it could
    receive a planted copy, so it is refused, and so is a relative one (the work dir)."""
    ahead, holder = tmp_path / "ahead", tmp_path / "holder"
    ahead.mkdir(0o755)
    executable(holder / "claude")
    search = f"{ahead}{os.pathsep}{holder}"
    assert refusal("claude", search) is None
    ahead.chmod(0o777)
    said = refusal("claude", search)
    assert said is not None and said.startswith(f"{ahead} is writable by every user"), said
    said = refusal("claude", f"{os.pathsep}{holder}")
    assert said is not None and "relative directory" in said, said


def test_a_cli_no_path_finds_is_no_refusal(tmp_path: Path) -> None:
    """Nothing to run is nothing to refuse: detection then says the CLI is not there."""
    assert refusal("no-such-cli", str(tmp_path)) is None
    assert refusal(str(tmp_path / "missing"), "") is None


@pytest.mark.root
def test_a_cli_the_agent_user_owns_is_refused(tmp_path: Path, agent_user: AgentUser) -> None:
    """A file the agent user owns (it may rewrite it whatever its mode) names that user."""
    cli = executable(tmp_path / "claude")
    os.chown(cli, agent_user.uid, agent_user.gid)
    said = refusal(str(cli), "")
    assert said == f"{cli} is owned by uid {agent_user.uid} ({agent_user.name}), not root"
