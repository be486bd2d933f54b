"""`.gc_meta.json`: what a finished task's directory belongs to, read by the GC loop.

Written into the task's own directory after its terminal report, as Multica's daemon writes it
(`execenv.WriteGCMeta`): a union keyed on `kind` — an issue, a chat session, an autopilot run, a
quick-create task — with the one id that names the parent record, and `completed_at`. A crash
before the report leaves no file, and the directory falls to the orphan rule. A file without a
`kind` is an issue's (Multica's first version wrote only `issue_id`).

This daemon adds one kind Multica's daemon does not write: `task`, for a task with no parent
record at all (every task of the embedded server). Its parent is the task itself, asked through
`GET /api/daemon/tasks/{id}/gc-check`; a Multica daemon reading it takes the unknown kind to the
orphan rule, so the file is safe on either side.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from daemon.boundary.beneath import read_under, write_under
from daemon.protocol.models import Task
from daemon.times import parse_utc

GC_META = ".gc_meta.json"
ISSUE, CHAT, AUTOPILOT_RUN, QUICK_CREATE, TASK = (
    "issue",
    "chat",
    "autopilot_run",
    "quick_create",
    "task",
)


@dataclass(frozen=True, slots=True)
class GcMeta:
    """One task directory's parent record and when its task completed."""

    kind: str
    workspace_id: str
    issue_id: str = ""
    chat_session_id: str = ""
    autopilot_run_id: str = ""
    task_id: str = ""
    completed_at: datetime | None = None
    local_directory: bool = False

    @property
    def parent_id(self) -> str:
        """The id of the record that decides this directory's life, by kind."""
        by_kind = {
            ISSUE: self.issue_id,
            CHAT: self.chat_session_id,
            AUTOPILOT_RUN: self.autopilot_run_id,
            QUICK_CREATE: self.task_id,
            TASK: self.task_id,
        }
        return by_kind.get(self.kind, "").strip()


def meta_for_task(task: Task) -> GcMeta:
    """The meta a finished task leaves, its parent chosen in Go's order (chat first)."""
    ws = task.workspace_id
    if task.chat_session_id:
        return GcMeta(CHAT, ws, chat_session_id=task.chat_session_id)
    if task.autopilot_run_id:
        return GcMeta(AUTOPILOT_RUN, ws, autopilot_run_id=task.autopilot_run_id)
    if task.issue_id:
        return GcMeta(ISSUE, ws, issue_id=task.issue_id)
    if task.quick_create_prompt:
        return GcMeta(QUICK_CREATE, ws, task_id=task.id)
    return GcMeta(TASK, ws, task_id=task.id)


def write_meta(env_root: Path, meta: GcMeta, now: datetime | None = None) -> Path:
    """Stamp `completed_at` and write the file (owner-only, never through a link)."""
    stamped = asdict(meta) | {"completed_at": _iso(now or datetime.now(UTC))}
    body = {k: v for k, v in stamped.items() if v not in ("", False)}
    body.setdefault("workspace_id", "")
    return write_under(env_root, GC_META, json.dumps(body))


def read_meta(env_root: Path) -> GcMeta | None:
    """The directory's meta, or None when it has none or it does not parse."""
    try:
        data = json.loads(read_under(env_root, GC_META) or "null")
    except (ValueError, OSError):
        return None
    if not isinstance(data, dict):
        return None

    def text(key: str) -> str:
        value = data.get(key)
        return value.strip() if isinstance(value, str) else ""

    return GcMeta(
        kind=text("kind") or ISSUE,
        workspace_id=text("workspace_id"),
        issue_id=text("issue_id"),
        chat_session_id=text("chat_session_id"),
        autopilot_run_id=text("autopilot_run_id"),
        task_id=text("task_id"),
        completed_at=parse_utc(data.get("completed_at")),
        local_directory=data.get("local_directory") is True,
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
