"""A task's place on disk, laid out as Multica's daemon lays it out.

    <workspaces root>/<workspace>/<task key>/        the task's own directory
        .managed_env.json                          says which issue or chat it serves
        multica-config/  multica-task-XXXX/  mcp-config.json
        workdir/                                   the agent's working directory
            .multica/daemon_task_context.json      the daemon's marker

The task key is Go's: the last 12 hex digits of the task id (`daemon.workdirs.names`); a directory
named after the whole id, as earlier versions made them, is still reused and collected. Ids
become path components through `daemon.files.private.path_part`, which keeps a plain id as it is
and turns anything else into a short, hashed, collision-free name. A follow-up task may run in the
`prior_work_dir` its claim names, but only when that directory is one of ours for the same
agent and issue (or chat): a server's word alone never points the agent at a directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.boundary.agent_user import SHARED_DIR_MODE, open_to_pass
from daemon.boundary.beneath import Owner, ensure_dir_under, read_under, remove_under, write_under
from daemon.files.private import ensure_dir, path_part
from daemon.protocol import jsonin
from daemon.protocol.models import Task
from daemon.task.setup.agent_env import make_temp_dir

if TYPE_CHECKING:
    from daemon.task.localdir.place import LocalPlace
from daemon.workdirs.names import task_dir_name

ENV_MARKER = ".managed_env.json"
TASK_MARKER = ".multica/daemon_task_context.json"
MANAGED_ENV = "multica-daemon-managed-env"
MANAGED_TASK = "multica-daemon-task"
MCP_CONFIG_FILE = "mcp-config.json"
LOCAL_WORKTREE = "worktree"
"""Where a local directory's worktree is made in the task's directory (Go's name)."""
MARKER_LIMIT = 64 * 1024
"""Bytes of a marker read back: the daemon writes a few hundred; anything else is not ours."""


@dataclass(frozen=True, slots=True)
class TaskDirs:
    """The directories of one task, and whether they are a prior task's, reused."""

    env_root: Path
    work_dir: Path
    config_root: Path
    temp_dir: Path
    reused: bool = False
    place: LocalPlace | None = None
    """The project's local directory the agent works in (None: the task's own `workdir`)."""


_HOLD_RETRY = 0.05


def unguarded(env_root: Path) -> bool:
    """A `hold` for a daemon without a GC: every directory is free to use."""
    return True


def _agent_id(task: Task) -> str:
    return task.agent_id or task.agent.id


def prepare_dirs(
    root: Path,
    task: Task,
    owner: Owner | None = None,
    hold: Callable[[Path], bool] = unguarded,
    *,
    local: bool = False,
) -> TaskDirs:
    """Create (or reuse) the task's directories and write the daemon's markers into them.

    `local`: the agent works in a project's local directory (daemon/task/localdir/), not in
    a `workdir` of its own: none is made, no marker is written here and nothing is reused.

    With `owner` (an agent user's uid and gid) the task's directory and all in it are that
    user's, and the workspace's directory is passable but not listable (0711) on the way.
    `hold` claims a task directory against the GC (daemon/workdirs/leases.py) before it is
    used: a prior directory the GC is removing right now is not reused, and a fresh one is
    waited for until the removal of a stale namesake is over.
    """
    prior = None if local else reusable_work_dir(root, task, owner[0] if owner else os.geteuid())
    if prior is not None and hold(prior.parent):
        env_root, work = prior.parent, prior
    else:
        prior = None
        env_root = root / path_part(task.workspace_id) / task_dir_name(task.id)
        work = env_root / "workdir"
        while not hold(env_root):
            time.sleep(_HOLD_RETRY)
    ensure_dir(root)
    workspace = env_root.parent.name
    # The root may be a link the operator made; below it, nothing is followed. The workspace's
    # folder is the daemon's alone (no agent writes in the root), and may be a volume of its own.
    mode = SHARED_DIR_MODE if owner else 0o700
    shared = ensure_dir_under(root.resolve(), workspace, mode, mounts=True)
    if owner:
        open_to_pass(shared)
    if local:
        ensure_dir_under(root / workspace, env_root.name, owner=owner)
        work = env_root / LOCAL_WORKTREE
    else:
        ensure_dir_under(root / workspace, f"{env_root.name}/workdir", owner=owner)
    config_root = ensure_dir_under(env_root, "multica-config", owner=owner)
    scope = {"issue_id": task.issue_id, "chat_session_id": task.chat_session_id}
    scope = {k: v for k, v in scope.items() if v}
    marker = {"managed_by": MANAGED_TASK, "agent_id": _agent_id(task), **scope}
    if not local:
        write_under(work, TASK_MARKER, task_marker(task), owner=owner)
    if scope and not local:
        # Only an issue or a chat is a scope a later task can prove it shares (Go writes the
        # same file only for them), so only such a directory is ever reused.
        env = {**marker, "managed_by": MANAGED_ENV, "workspace_id": task.workspace_id}
        write_under(env_root, ENV_MARKER, json.dumps(env), owner=owner)
    # Last: a failure above (a full disk) must not leave a `multica-task-*` directory behind.
    temp = make_temp_dir(env_root, owner)
    return TaskDirs(env_root, work, config_root, temp, reused=prior is not None)


def task_marker(task: Task) -> str:
    """The daemon's marker in an agent's work dir: the CLI reads it as a daemon task's."""
    scope = {"issue_id": task.issue_id, "chat_session_id": task.chat_session_id}
    scope = {k: v for k, v in scope.items() if v}
    return json.dumps({"managed_by": MANAGED_TASK, "agent_id": _agent_id(task), **scope}, indent=2)


def reusable_work_dir(root: Path, task: Task, uid: int | None = None) -> Path | None:
    """The claim's `prior_work_dir`, resolved, when it is ours for this agent and scope.

    As Go's `shouldReusePriorWorkdir`: `<root>/<workspace>/<task>/workdir` once links are
    resolved, with both markers naming this workspace, agent and issue (or chat session).
    With `uid`, the directory and its task's directory must also belong to that user (the one
    agents run as): one left by agents of another user is not theirs to continue.
    """
    agent_id = _agent_id(task)
    if not task.prior_work_dir or not agent_id or not (task.issue_id or task.chat_session_id):
        return None
    try:
        real_root = root.resolve(strict=True)
        work = Path(task.prior_work_dir).resolve(strict=True)
        parts = work.relative_to(real_root).parts
    except (OSError, ValueError, RuntimeError):
        return None
    if len(parts) != 3 or parts[0] != path_part(task.workspace_id) or parts[2] != "workdir":
        return None
    if not work.is_dir():
        return None
    if uid is not None and {work.stat().st_uid, work.parent.stat().st_uid} != {uid}:
        return None
    env = _json(read_under(work.parent, ENV_MARKER, MARKER_LIMIT))
    marker = _json(read_under(work, TASK_MARKER, MARKER_LIMIT))
    if env.get("managed_by") != MANAGED_ENV or marker.get("managed_by") != MANAGED_TASK:
        return None
    if env.get("workspace_id") != task.workspace_id:
        return None
    if env.get("agent_id") != agent_id or marker.get("agent_id") != agent_id:
        return None
    key, value = (
        ("issue_id", task.issue_id) if task.issue_id else ("chat_session_id", task.chat_session_id)
    )
    return work if env.get(key) == value and marker.get(key) == value else None


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = jsonin.loads(text, limit=MARKER_LIMIT, what="a marker") if text else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def resumable_session(task: Task, dirs: TaskDirs) -> tuple[str, bool]:
    """The session to resume, and whether a session the claim named was dropped.

    A claim that names where its session ran (`prior_work_dir`) resumes only when this run
    reuses that directory, as Go does: Claude keeps sessions per directory. A claim without
    one (a server that keeps no work directories) resumes by the session alone, and the
    backend starts fresh when the session is unknown.
    """
    session = task.prior_session_id
    if not session or not task.prior_work_dir or dirs.reused:
        return session, False
    return "", True


def write_mcp_config(dirs: TaskDirs, task: Task, owner: Owner | None = None) -> Path | None:
    """The agent's `mcp_config` in an owner-only file of the task's directory, if it has one."""
    config = task.agent.mcp_config
    if config is None:
        return None
    return write_under(dirs.env_root, MCP_CONFIG_FILE, json.dumps(config), owner=owner)


def remove_tree(path: Path) -> None:
    """Remove a task's temp directory (from the task's directory's handle, no link followed,
    however deep); what cannot be removed stays."""
    with contextlib.suppress(OSError):
        remove_under(path.parent, path.name)
