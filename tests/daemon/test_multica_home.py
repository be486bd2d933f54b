"""Tests for reading the `multica` CLI's files in `~/.multica`."""

from __future__ import annotations

import json
import os
import stat
import uuid
from pathlib import Path

import pytest

from daemon.errors import ConfigError
from daemon.multica_home import (
    MulticaConfig,
    daemon_id,
    default_workspaces_root,
    legacy_daemon_ids,
    profile_dir,
    read_config,
)

KNOWN = "0190f5e2-7c1a-7d3e-9b2a-1f2e3d4c5b6a"


def _id_file(home: Path) -> Path:
    return home / ".multica" / "daemon.id"


def test_an_existing_daemon_id_is_reused(tmp_path: Path) -> None:
    """The id Multica's daemon wrote is the one this daemon registers with."""
    _id_file(tmp_path).parent.mkdir(parents=True)
    _id_file(tmp_path).write_text(KNOWN + "\n")
    assert daemon_id(tmp_path) == KNOWN


def test_a_pinned_id_wins_over_the_file(tmp_path: Path) -> None:
    """MULTICA_DAEMON_ID comes first, and the file is left untouched."""
    assert daemon_id(tmp_path, pinned=" pinned-id ") == "pinned-id"
    assert not _id_file(tmp_path).exists()


def test_a_missing_id_is_created_once_owner_only(tmp_path: Path) -> None:
    """With no file, one UUID is written with mode 0600 and returned again on the next start."""
    first = daemon_id(tmp_path)
    uuid.UUID(first)
    assert stat.S_IMODE(_id_file(tmp_path).stat().st_mode) == 0o600
    assert daemon_id(tmp_path) == first
    assert list(_id_file(tmp_path).parent.iterdir()) == [_id_file(tmp_path)]


def test_a_garbled_id_file_is_replaced(tmp_path: Path) -> None:
    """A file that holds no UUID is rewritten with a fresh one."""
    _id_file(tmp_path).parent.mkdir(parents=True)
    _id_file(tmp_path).write_text("not-a-uuid")
    fresh = daemon_id(tmp_path)
    assert fresh != "not-a-uuid"
    assert _id_file(tmp_path).read_text().strip() == fresh


def test_a_profiles_id_is_promoted_to_the_machine_file(tmp_path: Path) -> None:
    """An older per-profile id becomes the machine id when the machine file is missing."""
    old = profile_dir(tmp_path, "work") / "daemon.id"
    old.parent.mkdir(parents=True)
    old.write_text(KNOWN)
    assert daemon_id(tmp_path, profile="work") == KNOWN
    assert _id_file(tmp_path).read_text().strip() == KNOWN


def test_legacy_ids_are_the_host_forms_and_every_earlier_id(tmp_path: Path) -> None:
    """Go's `LegacyDaemonIDs` (the host name with and without `.local`, each with `-<profile>`),
    the profiles' own ids and an earlier agent-daemon's; never the current id, each once, and
    an unreadable file skipped."""
    current, older, ours = KNOWN, str(uuid.uuid4()), str(uuid.uuid4())
    for name, value in (("work", older), ("home", current)):
        path = profile_dir(tmp_path, name) / "daemon.id"
        path.parent.mkdir(parents=True)
        path.write_text(value + "\n")
    (profile_dir(tmp_path, "broken") / "daemon.id").mkdir(parents=True)
    earlier = tmp_path / "state" / "daemon_id"
    earlier.parent.mkdir()
    earlier.write_text(ours)
    ids = legacy_daemon_ids(tmp_path, "box.local", "work", current, earlier)
    assert ids == ["box", "box.local", "box-work", "box.local-work", older, ours]
    assert legacy_daemon_ids(tmp_path / "none", " box ", "", current) == ["box", "box.local"]
    assert legacy_daemon_ids(tmp_path / "none", "box", "", "box") == ["box.local"]


def test_config_fields_are_read(tmp_path: Path) -> None:
    """server_url, token, workspace_id, device_name and workspaces_root come from config.json."""
    path = tmp_path / ".multica" / "config.json"
    path.parent.mkdir(parents=True)
    fields = {
        "server_url": "https://api.example.test",
        "token": "mul_abc",
        "workspace_id": "ws-1",
        "device_name": "box",
        "workspaces_root": "/srv/mw",
        "app_url": "ignored",
    }
    path.write_text(json.dumps(fields))
    config = read_config(tmp_path)
    assert config.server_url == "https://api.example.test"
    assert config.token == "mul_abc"
    assert (config.workspace_id, config.device_name) == ("ws-1", "box")
    assert config.workspaces_root == "/srv/mw"
    assert config.path == path


def test_a_profiles_config_lives_under_profiles(tmp_path: Path) -> None:
    """A named profile reads `~/.multica/profiles/<name>/config.json`."""
    path = tmp_path / ".multica" / "profiles" / "staging" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"server_url": "https://staging.test"}))
    assert read_config(tmp_path, "staging").server_url == "https://staging.test"
    assert read_config(tmp_path) == MulticaConfig()


def test_a_broken_config_names_the_file(tmp_path: Path) -> None:
    """Unreadable JSON stops start-up with the file's path in the message."""
    path = tmp_path / ".multica" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"config\.json"):
        read_config(tmp_path)


def test_a_wrongly_typed_field_is_refused(tmp_path: Path) -> None:
    """A field that is not a string is named in the error."""
    path = tmp_path / ".multica" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"token": 5}))
    with pytest.raises(ConfigError, match="token"):
        read_config(tmp_path)


@pytest.mark.parametrize("name", ["..", "a/b", ".", "work\nINFO forged line", "a\x00b"])
def test_a_profile_name_cannot_leave_the_profiles_directory(tmp_path: Path, name: str) -> None:
    """Profile names with path separators, control characters or dots-only are refused."""
    with pytest.raises(ConfigError, match="profile"):
        profile_dir(tmp_path, name)


def test_default_workspaces_root_follows_the_profile(tmp_path: Path) -> None:
    """`~/multica_workspaces`, suffixed with the profile name for a named profile."""
    assert default_workspaces_root(tmp_path) == tmp_path / "multica_workspaces"
    assert default_workspaces_root(tmp_path, "w") == tmp_path / "multica_workspaces_w"


def test_an_earlier_state_dir_id_is_promoted_when_multica_has_none(tmp_path: Path) -> None:
    """agent-daemon's own earlier id (state dir) becomes the machine id, so its runtimes stay."""
    legacy = tmp_path / "state" / "daemon_id"
    legacy.parent.mkdir()
    legacy.write_text(KNOWN + "\n")
    assert daemon_id(tmp_path, legacy=legacy) == KNOWN
    assert _id_file(tmp_path).read_text().strip() == KNOWN
    assert stat.S_IMODE(_id_file(tmp_path).stat().st_mode) == 0o600


def test_multicas_own_id_wins_over_the_state_dir_id(tmp_path: Path) -> None:
    """With both files present the machine's `~/.multica/daemon.id` is the one used."""
    legacy = tmp_path / "daemon_id"
    legacy.write_text(str(uuid.uuid4()))
    _id_file(tmp_path).parent.mkdir(parents=True)
    _id_file(tmp_path).write_text(KNOWN)
    assert daemon_id(tmp_path, legacy=legacy) == KNOWN


def test_a_config_others_can_write_is_refused_in_one_line(tmp_path: Path) -> None:
    """A `config.json` (or `~/.multica`) another user could write may name any server and
    token: start-up stops with one line naming it, and a fresh `~/.multica` is owner-only."""
    daemon_id(tmp_path)
    assert stat.S_IMODE((tmp_path / ".multica").stat().st_mode) == 0o700
    config = tmp_path / ".multica" / "config.json"
    config.write_text(json.dumps({"server_url": "http://planted.example", "token": "mul_x"}))
    config.chmod(0o666)
    with pytest.raises(ConfigError, match=r"config.json is writable by others \(mode 666\)"):
        read_config(tmp_path)
    config.chmod(0o600)
    (tmp_path / ".multica").chmod(0o777)
    with pytest.raises(ConfigError, match=r"\.multica is writable by others"):
        read_config(tmp_path)


def test_a_daemon_id_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    """`daemon.id` planted as a FIFO (which would block the read) or a link to `/dev/zero`
    (which never ends) stops start-up with a line naming it."""
    _id_file(tmp_path).parent.mkdir(parents=True, mode=0o700)
    os.mkfifo(_id_file(tmp_path))
    with pytest.raises(ConfigError, match=r"daemon id file .*daemon\.id: .*not a regular file"):
        daemon_id(tmp_path)
    _id_file(tmp_path).unlink()
    _id_file(tmp_path).symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match=r"daemon id file .*daemon\.id: .*not a regular file"):
        daemon_id(tmp_path)
