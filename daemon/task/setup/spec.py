"""What a task's agent is given before it starts: its place on disk with its skills and MCP
file, then its brief, environment, prompt and resume choice, as one `RunSpec`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from backends.base import ReadBeat, RunObserver, RunSpec
from backends.claude import ClaudeBackend
from backends.process import ProcessRegistry
from backends.process.identity import AgentUser
from backends.process.unit import Containment
from daemon.boundary.beneath import write_under
from daemon.config import Settings
from daemon.local_skills.disabled import (
    SETTINGS_FILE,
    claude_settings,
    codex_disabled_paths,
    disabled_for,
)
from daemon.logs import short_id
from daemon.protocol.models import Task
from daemon.services import AgentReach
from daemon.task.localdir.locks import DirectoryLocks
from daemon.task.localdir.place import prepare_local
from daemon.task.localdir.resource import LocalDirectory
from daemon.task.setup.agent_env import TaskPlace, agent_env, blocked_custom_keys
from daemon.task.setup.codex_config import shell_names
from daemon.task.setup.codex_home import (
    CODEX,
    SESSIONS,
    prepare_codex_home,
    task_codex_home,
    user_codex_home,
)
from daemon.task.setup.prompt import build_prompt
from daemon.task.setup.runtime_brief import (
    brief_file,
    brief_in_prompt,
    runtime_brief,
    write_brief,
)
from daemon.task.setup.skills import write_skills
from daemon.task.setup.workspace import (
    TaskDirs,
    prepare_dirs,
    remove_tree,
    resumable_session,
    unguarded,
    write_mcp_config,
)
from daemon.workdirs.git import Git

log = logging.getLogger(__name__)

CLAUDE = ClaudeBackend.name

EXIT_WAIT = 5.0
"""Seconds an agent gets to exit after closing stdout, when the exit grace is shorter."""


def prepare(
    root: Path,
    task: Task,
    backend: str,
    user: AgentUser | None = None,
    hold: Callable[[Path], bool] = unguarded,
    local: LocalSetup | None = None,
) -> tuple[TaskDirs, Path | None]:
    """The task's directories with their markers, its skills, and its MCP file (if any); all
    the agent user's when there is one. With `local`, the agent works in the project's local
    directory (daemon/task/localdir/place.py)."""
    owner = user.owner if user else None
    if local is not None:
        git = local.git.acting_as(user, local.folder.real)
        dirs = prepare_local(root, task, backend, local.folder, git, local.locks, owner, hold)
    else:
        dirs = prepare_dirs(root, task, owner, hold)
    try:
        if backend != CODEX and local is None:  # Codex reads skills from its own home
            write_skills(dirs.work_dir, backend, task.agent.skills, owner)
        return dirs, write_mcp_config(dirs, task, owner)
    except BaseException:
        # The run never learns of `dirs`, so it cannot remove the temp dir: that is done here.
        if dirs.place is not None:
            dirs.place.discard()
        remove_tree(dirs.temp_dir)
        raise


@dataclass(frozen=True, slots=True)
class LocalSetup:
    """What `prepare` needs for a project's local directory: the folder, the git that makes
    its worktree, and the daemon's per-folder and per-repository locks."""

    folder: LocalDirectory
    git: Git
    locks: DirectoryLocks


def agent_spec(
    task: Task,
    backend: str,
    dirs: TaskDirs,
    settings: Settings,
    observer: RunObserver,
    mcp_config: Path | None,
    reach: AgentReach,
    slot: int,
    *,
    processes: ProcessRegistry | None,
    read_beat: ReadBeat | None = None,
    containment: Containment | None = None,
) -> RunSpec:
    """The brief in the work directory, then the prompt, environment and resume choice: the
    one place a task's `RunSpec` is made."""
    user = settings.agent_identity
    brief_in_file = True
    if dirs.place is not None:
        # A user's own brief file keeps its content; one that is a link gets none of ours.
        brief_in_file = dirs.place.writes.put_brief(brief_file(backend), runtime_brief(task))
    else:
        write_brief(dirs.work_dir, backend, task, user.owner if user else None)
    where = TaskPlace(
        server_url=reach.server_url,
        work_dir=dirs.work_dir,
        temp_dir=dirs.temp_dir,
        config_root=dirs.config_root,
        workspaces_root=settings.workspaces_root,
        health_port=reach.health_port,
        slot=slot,
        multica_bin=reach.multica_bin,
        require_task_token=True,
    )
    env = agent_env(reach.base_env, task, where)
    blocked = blocked_custom_keys(task.agent.custom_env)
    if user is not None:
        env = user.environ(env)
    owner = user.owner if user else None
    # The runtime's own skills the agent turned off; its own skills of the same name stay on.
    hidden, given = disabled_for(task, backend), [s.name for s in task.agent.skills]
    settings_file = None
    codex_sessions: Path | None = None
    if backend == CODEX:
        # The Codex home the agent would have used: its user's, as its environment names it.
        mine = user_codex_home(env)
        env["CODEX_HOME"] = str(task_codex_home(dirs.env_root))
        custom = {k: v for k, v in task.agent.custom_env.items() if k not in blocked}
        shell = shell_names(env, reach.base_env, custom)
        home = env.get("HOME", "")
        off = codex_disabled_paths(hidden, task_codex_home(dirs.env_root), home, given)
        prepare_codex_home(dirs.env_root, mine, task.agent.skills, owner, shell, off)
        codex_sessions = mine / SESSIONS
    elif backend == CLAUDE and (claude := claude_settings(hidden, given)) is not None:
        text = json.dumps(claude, indent=2)
        settings_file = write_under(dirs.env_root, SETTINGS_FILE, text, owner=owner)
    if blocked:
        # Multica's daemon skips the same names; say so rather than drop them silently.
        log.warning("task %s: custom_env may not set %s", short_id(task.id), ", ".join(blocked))
    resume, lost = resumable_session(task, dirs)
    if lost:
        log.info(
            "task %s: prior session not resumed: its work dir is not reused", short_id(task.id)
        )
    return RunSpec(
        prompt=build_prompt(task, session_lost=lost, shared_folder=_shares_folder(task, dirs)),
        workdir=dirs.work_dir,
        env=env,
        task_id=task.id,
        model=task.agent.model,
        resume_session_id=resume,
        # The runtime brief in the work directory carries the agent's instructions; only a
        # CLI that reads no brief file gets them in its prompt too.
        instructions=brief_in_prompt(backend, task)
        or ("" if brief_in_file else runtime_brief(task)),
        extra_args=tuple(task.agent.custom_args),
        kill_grace=settings.kill_grace,
        # An agent that closed stdout after its final result gets the whole exit grace.
        exit_wait=max(EXIT_WAIT, settings.exit_grace),
        observer=observer,
        mcp_config=mcp_config,
        mcp=task.agent.mcp_config,
        settings_file=settings_file,
        processes=processes,
        user=user,
        codex_sessions=codex_sessions,
        read_beat=read_beat,
        containment=containment,
    )


def _shares_folder(task: Task, dirs: TaskDirs) -> bool:
    """A chat turn in the user's folder itself runs beside whatever task holds it: it is told
    so (Go's "Shared working directory" block)."""
    return dirs.place is not None and dirs.place.in_place and bool(task.chat_session_id)
