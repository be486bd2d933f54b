"""The state directory's start-up check: made owner-only, or one error naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daemon.errors import DaemonError
from daemon.state.directory import require_writable


def test_a_missing_state_directory_is_made_owner_only(tmp_path: Path) -> None:
    """Made whatever the umask: 0700, since it will hold prompts and task tokens."""
    old = os.umask(0o022)
    try:
        require_writable(tmp_path / "a" / "state")
    finally:
        os.umask(old)
    assert (tmp_path / "a" / "state").stat().st_mode & 0o777 == 0o700
    assert list((tmp_path / "a" / "state").iterdir()) == []  # the probe file is gone


def test_a_state_directory_below_a_file_names_the_directory(tmp_path: Path) -> None:
    """A path through a regular file is an error that names the state directory."""
    (tmp_path / "file").write_text("x")
    state = tmp_path / "file" / "state"
    with pytest.raises(DaemonError) as raised:
        require_writable(state)
    assert str(raised.value) == f"cannot use the state directory {state}: Not a directory"
