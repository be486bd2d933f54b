"""Tests for a task's place on disk: safe names, Go's layout, and when a prior dir is reused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from daemon.files.private import path_part
from daemon.protocol.models import Task
from daemon.task.setup.workspace import (
    ENV_MARKER,
    TASK_MARKER,
    prepare_dirs,
    resumable_session,
    reusable_work_dir,
)

WS = "0190f5e2-7c1a-7d3e-9b2a-1f2e3d4c5b6a"
AGENT = "ag-1"


def _task(**fields: Any) -> Task:
    body: dict[str, Any] = {
        "id": "0190f5e2-aaaa-7000-8000-000000000001",
        "workspace_id": WS,
        "agent_id": AGENT,
        "issue_id": "issue-1",
    }
    body.update(fields)
    return Task.model_validate(body)


def test_a_climbing_id_cannot_leave_the_root(tmp_path: Path) -> None:
    """A workspace id of `../x` stays one component inside the workspaces root."""
    dirs = prepare_dirs(tmp_path, _task(workspace_id="../x", id="../../y"))
    assert dirs.work_dir.resolve().is_relative_to(tmp_path.resolve())
    assert len(dirs.work_dir.relative_to(tmp_path).parts) == 3


def test_a_300_character_id_makes_a_work_dir(tmp_path: Path) -> None:
    """No ENAMETOOLONG for a 300-character workspace or task id."""
    dirs = prepare_dirs(tmp_path, _task(workspace_id="w" * 300, id="t" * 300))
    assert dirs.work_dir.is_dir()
    assert dirs.work_dir.relative_to(tmp_path).parts[0] == path_part("w" * 300)


def test_tasks_sharing_a_prefix_get_their_own_directories(tmp_path: Path) -> None:
    """Keyed on the id's random tail: two UUIDv7 ids from the same second never share a dir."""
    one = prepare_dirs(tmp_path, _task(id="0190f5e2-aaaa-7000-8000-000000000001"))
    two = prepare_dirs(tmp_path, _task(id="0190f5e2-aaaa-7000-8000-000000000002"))
    assert one.work_dir != two.work_dir


def test_the_layout_and_markers_are_gos(tmp_path: Path) -> None:
    """`<root>/<workspace>/<last 12 hex of the task id>/workdir` (Go's `PredictRootDir`),
    `.managed_env.json` and the workdir marker."""
    task = _task(id="0190f5e2-aaaa-7000-8000-0123456789ab")
    dirs = prepare_dirs(tmp_path, task)
    assert dirs.work_dir == tmp_path / WS / "0123456789ab" / "workdir"
    env = json.loads((dirs.env_root / ENV_MARKER).read_text())
    assert env == {
        "managed_by": "multica-daemon-managed-env",
        "workspace_id": WS,
        "agent_id": AGENT,
        "issue_id": "issue-1",
    }
    marker = json.loads((dirs.work_dir / TASK_MARKER).read_text())
    assert marker == {"managed_by": "multica-daemon-task", "agent_id": AGENT, "issue_id": "issue-1"}
    assert dirs.temp_dir.stat().st_mode & 0o777 == 0o700
    assert dirs.config_root.stat().st_mode & 0o777 == 0o700


def test_a_task_without_issue_or_chat_gets_no_reuse_marker(tmp_path: Path) -> None:
    """An autopilot run has no scope a later task could share: its dir is never reused."""
    dirs = prepare_dirs(tmp_path, _task(issue_id="", autopilot_run_id="r-1"))
    assert not (dirs.env_root / ENV_MARKER).exists()


def test_our_prior_dir_for_the_same_agent_and_issue_is_reused(tmp_path: Path) -> None:
    """Reached through a symlinked root or not, the prior work dir is the run's work dir."""
    prior = prepare_dirs(tmp_path / "root", _task()).work_dir
    (tmp_path / "link").symlink_to(tmp_path / "root")
    via_link = str(tmp_path / "link" / prior.relative_to(tmp_path / "root"))
    follow_up = _task(id="next", prior_work_dir=via_link, prior_session_id="s-1")
    dirs = prepare_dirs(tmp_path / "root", follow_up)
    assert (dirs.work_dir, dirs.reused) == (prior.resolve(), True)
    assert resumable_session(follow_up, dirs) == ("s-1", False)
    marker = json.loads((dirs.work_dir / TASK_MARKER).read_text())
    assert marker["issue_id"] == "issue-1"


def test_a_prior_dir_named_after_the_whole_task_id_is_still_reused(tmp_path: Path) -> None:
    """An earlier version's `<workspace>/<full task id>/workdir`, markers matching: reused."""
    old = _task()
    moved = tmp_path / WS / old.id
    prepare_dirs(tmp_path, old).env_root.rename(moved)
    follow_up = _task(id="next", prior_work_dir=str(moved / "workdir"), prior_session_id="s-1")
    dirs = prepare_dirs(tmp_path, follow_up)
    assert (dirs.work_dir, dirs.reused) == ((moved / "workdir").resolve(), True)
    assert resumable_session(follow_up, dirs) == ("s-1", False)


def test_a_prior_dir_is_not_reused_for_another_agent_issue_or_workspace(tmp_path: Path) -> None:
    """Every marker field must match this task."""
    prior = str(prepare_dirs(tmp_path, _task()).work_dir)
    for other in ({"agent_id": "ag-2"}, {"issue_id": "issue-2"}, {"workspace_id": "ws-2"}):
        assert reusable_work_dir(tmp_path, _task(id="n", prior_work_dir=prior, **other)) is None


def test_an_unmarked_or_outside_dir_is_not_reused(tmp_path: Path) -> None:
    """No markers, a bad shape, or outside the root: the task starts fresh."""
    root = tmp_path / "root"
    unmarked = root / WS / "planted" / "workdir"
    unmarked.mkdir(parents=True)
    elsewhere = prepare_dirs(tmp_path / "other-root", _task()).work_dir
    shallow = prepare_dirs(root, _task()).env_root
    for prior in (unmarked, elsewhere, shallow, root / "missing", Path("relative")):
        assert reusable_work_dir(root, _task(id="n", prior_work_dir=str(prior))) is None


def test_a_symlinked_marker_does_not_count(tmp_path: Path) -> None:
    """A marker that is a link (planted by an agent) is not the daemon's marker."""
    prior = prepare_dirs(tmp_path, _task()).work_dir
    marker = prior / TASK_MARKER
    copy = tmp_path / "copy.json"
    copy.write_text(marker.read_text())
    marker.unlink()
    marker.symlink_to(copy)
    assert reusable_work_dir(tmp_path, _task(id="n", prior_work_dir=str(prior))) is None


def test_a_session_is_dropped_when_its_work_dir_is_not_reused(tmp_path: Path) -> None:
    """Named with a work dir that is not this run's: fresh session, and the prompt is told.
    Named without one: resumed by id alone (the backend falls back when it is unknown)."""
    lost = _task(prior_work_dir=str(tmp_path / "gone"), prior_session_id="s-1")
    dirs = prepare_dirs(tmp_path / "root", lost)
    assert resumable_session(lost, dirs) == ("", True)
    bare = _task(prior_session_id="s-1")
    assert resumable_session(bare, dirs) == ("s-1", False)
