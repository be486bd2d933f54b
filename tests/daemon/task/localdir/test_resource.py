"""Which local directory is this daemon's, and whether its folder may be worked in."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from backends.process.identity import AgentUser
from daemon.errors import LocalDirectoryError
from daemon.protocol.models import Task
from daemon.task.localdir.resource import check_path, find


def _task(*refs: dict[str, Any], **fields: Any) -> Task:
    resources = [{"resource_type": "local_directory", "resource_ref": r} for r in refs]
    resources.append({"resource_type": "github_repo", "resource_ref": {"url": "https://x/y"}})
    return Task(id="t-1", project_resources=resources, **fields)


def test_only_the_resource_bound_to_this_daemon_is_taken() -> None:
    """Another machine's folder is skipped; ours comes with its label, mode and real path."""
    mine = {"local_path": "/srv/app/", "daemon_id": "d-1", "label": "App", "execution_mode": ""}
    other = {"local_path": "/elsewhere", "daemon_id": "d-2"}
    found = find(_task(other, mine), "d-1")
    assert found is not None
    assert (found.path, found.label, found.worktree) == (Path("/srv/app"), "App", False)
    assert found.display_name == "App"
    assert find(_task(other), "d-1") is None
    assert find(_task(mine, is_leader_task=True), "d-1") is None  # a leader only coordinates


@pytest.mark.parametrize(
    ("refs", "words"),
    [
        (({"local_path": "/a", "daemon_id": "d-1"},) * 2, "multiple local_directory"),
        (({"local_path": "/a"},), "missing daemon_id"),
        (({"local_path": "", "daemon_id": "d-1"},), "local_path is empty"),
        (({"local_path": "a/b", "daemon_id": "d-1"},), "must be absolute"),
    ],
)
def test_a_broken_resource_fails_rather_than_guess(refs: tuple[dict[str, Any]], words: str) -> None:
    """Two of ours, no daemon id, no or a relative path: refused, never guessed."""
    with pytest.raises(LocalDirectoryError, match=words):
        find(_task(*refs), "d-1")


def test_an_unknown_mode_is_refused_not_run_in_place() -> None:
    """A mode this daemon does not know fails: in place would ignore a wish for isolation."""
    found = find(_task({"local_path": "/a", "daemon_id": "d", "execution_mode": "x"}), "d")
    assert found is not None
    with pytest.raises(LocalDirectoryError, match="refusing to run in place"):
        found.check_mode()


def test_a_link_into_a_protected_root_or_a_home_is_refused(tmp_path: Path) -> None:
    """The real path is checked too: a project link to `/etc` or to a home is refused."""
    (tmp_path / "etc-link").symlink_to("/etc")
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "home-link").symlink_to(home)
    for name, words in (("etc-link", 'protected system root "/etc"'), ("home-link", "home")):
        ref = {"local_path": str(tmp_path / name), "daemon_id": "d"}
        found = find(_task(ref), "d")
        assert found is not None
        with pytest.raises(LocalDirectoryError, match=words):
            check_path(found, [str(home)], None)


def test_a_writable_folder_passes_and_leaves_no_probe(tmp_path: Path) -> None:
    """The probe file is made and removed: the folder is as it was."""
    found = find(_task({"local_path": str(tmp_path), "daemon_id": "d"}), "d")
    assert found is not None
    check_path(found, [], None)
    assert list(tmp_path.iterdir()) == []


def test_a_file_is_not_a_folder(tmp_path: Path) -> None:
    """A path naming a file is refused."""
    (tmp_path / "f").write_text("")
    found = find(_task({"local_path": str(tmp_path / "f"), "daemon_id": "d"}), "d")
    assert found is not None
    with pytest.raises(LocalDirectoryError, match="not a directory"):
        check_path(found, [], None)


def test_an_agent_user_must_be_able_to_write_the_folder(tmp_path: Path) -> None:
    """With an agent user, its owner, group and mode bits decide, and the sentence says whose
    folder it is and that the daemon changes nothing."""
    folder = tmp_path / "project"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    me = os.stat(folder)
    other = AgentUser("agent1", me.st_uid + 4242, me.st_gid + 4242, (me.st_gid + 4242,), "/h")
    found = find(_task({"local_path": str(folder), "daemon_id": "d"}), "d")
    assert found is not None
    with pytest.raises(LocalDirectoryError) as refused:
        check_path(found, [], other)
    text = str(refused.value)
    assert '"agent1"' in text and f"uid {me.st_uid}" in text and "mode 0755" in text
    assert "does not change the permissions" in text
    folder.chmod(0o775)
    group = AgentUser("agent1", me.st_uid + 4242, me.st_gid, (me.st_gid,), "/h")
    check_path(found, [], group)  # its group may write it
    owner = AgentUser("agent1", me.st_uid, me.st_gid, (me.st_gid,), "/h")
    check_path(found, [], owner)
    assert list(folder.iterdir()) == []  # no probe as root: the bits decide
