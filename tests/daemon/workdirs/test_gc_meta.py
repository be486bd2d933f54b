"""`.gc_meta.json`: the parent a finished task leaves for the GC, in Multica's shape."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from daemon.protocol.models import Task
from daemon.workdirs import gc_meta
from daemon.workdirs.gc_meta import GC_META, meta_for_task, read_meta, write_meta
from tests.daemon.workdirs.support import NOW


def _task(**fields: str) -> Task:
    return Task.model_validate({"id": "t-1", "workspace_id": "ws-1", **fields})


def test_the_parent_is_chosen_in_gos_order() -> None:
    """Chat first, then autopilot run, issue, quick-create; a task with none is its own."""
    both = _task(chat_session_id="c", issue_id="i")
    assert (meta_for_task(both).kind, meta_for_task(both).parent_id) == ("chat", "c")
    assert meta_for_task(_task(autopilot_run_id="r", issue_id="i")).parent_id == "r"
    assert meta_for_task(_task(issue_id="i")).kind == gc_meta.ISSUE
    quick = meta_for_task(_task(quick_create_prompt="make an issue"))
    assert (quick.kind, quick.parent_id) == (gc_meta.QUICK_CREATE, "t-1")
    assert meta_for_task(_task()).kind == gc_meta.TASK


def test_written_as_multica_writes_it_and_read_back(tmp_path: Path) -> None:
    """Go's field names, an RFC 3339 `completed_at`, empty ids left out; owner-only."""
    path = write_meta(tmp_path, meta_for_task(_task(issue_id="i-1")), NOW)
    assert json.loads(path.read_text()) == {
        "kind": "issue",
        "issue_id": "i-1",
        "workspace_id": "ws-1",
        "completed_at": "2026-06-01T12:00:00Z",
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    meta = read_meta(tmp_path)
    assert meta is not None and meta.completed_at == NOW and meta.issue_id == "i-1"


def test_a_first_version_file_is_an_issues_and_junk_is_none(tmp_path: Path) -> None:
    """No `kind` (Multica's first version) reads as an issue; bad JSON as no meta at all."""
    (tmp_path / GC_META).write_text(
        '{"issue_id": "i", "workspace_id": "w", "completed_at": "0001-01-01T00:00:00Z"}'
    )
    meta = read_meta(tmp_path)
    assert meta is not None and meta.kind == "issue" and meta.completed_at is None
    (tmp_path / GC_META).write_text("{not json")
    assert read_meta(tmp_path) is None
    (tmp_path / GC_META).unlink()
    assert read_meta(tmp_path) is None
