"""What a task's agent is given before it starts: its place on disk with its skills and MCP
file, then its brief, environment, prompt and resume choice, as one `RunSpec`."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from backends.base import RunObserver, RunSpec
from backends.process import ProcessRegistry
from daemon.config import Settings
from daemon.logs import short_id
from daemon.protocol.models import Task
from daemon.task.agent_env import TaskPlace, agent_env, blocked_custom_keys
from daemon.task.prompt import build_prompt
from daemon.task.runtime_brief import write_brief
from daemon.task.skills import write_skills
from daemon.task.workspace import (
    TaskDirs,
    prepare_dirs,
    resumable_session,
    run_spec,
    write_mcp_config,
)

log = logging.getLogger(__name__)


def prepare(root: Path, task: Task, backend: str) -> tuple[TaskDirs, Path | None]:
    """The task's directories with their markers, its skills, and its MCP file (if any)."""
    dirs = prepare_dirs(root, task)
    write_skills(dirs.work_dir, backend, task.agent.skills)
    return dirs, write_mcp_config(dirs, task)


@dataclass(frozen=True, slots=True)
class AgentReach:
    """How an agent reaches the daemon and its server: what a task's environment adds."""

    server_url: str
    base_env: Mapping[str, str]
    slot: int
    health_port: int
    multica_bin: Path | None


def agent_spec(
    task: Task,
    backend: str,
    dirs: TaskDirs,
    settings: Settings,
    observer: RunObserver,
    mcp_config: Path | None,
    reach: AgentReach,
    *,
    processes: ProcessRegistry | None,
) -> RunSpec:
    """The brief in the work directory, then the prompt, environment and resume choice."""
    write_brief(dirs.work_dir, backend, task)
    where = TaskPlace(
        server_url=reach.server_url,
        work_dir=dirs.work_dir,
        temp_dir=dirs.temp_dir,
        config_root=dirs.config_root,
        workspaces_root=settings.workspaces_root,
        health_port=reach.health_port,
        slot=reach.slot,
        multica_bin=reach.multica_bin,
        require_task_token=True,
    )
    env = agent_env(reach.base_env, task, where)
    blocked = blocked_custom_keys(task.agent.custom_env)
    if blocked:
        # Multica's daemon skips the same names; say so rather than drop them silently.
        log.warning("task %s: custom_env may not set %s", short_id(task.id), ", ".join(blocked))
    resume, lost = resumable_session(task, dirs)
    if lost:
        log.info(
            "task %s: prior session not resumed: its work dir is not reused", short_id(task.id)
        )
    return run_spec(
        task,
        dirs,
        env,
        settings,
        observer,
        prompt=build_prompt(task, session_lost=lost),
        resume=resume,
        mcp_config=mcp_config,
        processes=processes,
    )


def describe_error(exc: BaseException) -> str:
    """The error itself, out of the task-group wrapping a raise inside `_execute` arrives in."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"


def remove_tree(path: Path) -> None:
    """Remove a task's temp directory; what cannot be removed stays."""
    shutil.rmtree(path, ignore_errors=True)
