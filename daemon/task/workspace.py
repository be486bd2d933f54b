"""Everything a task's agent is given: its work directory, prompt, environment and run spec."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from backends.base import RunObserver, RunSpec
from daemon.config import Settings
from daemon.files import ensure_dir
from daemon.logs import short_id
from daemon.ops.sdnotify import NOTIFY_ENV_VARS
from daemon.protocol.models import Task

# The daemon's own settings and credentials never reach an agent: it gets only its task-scoped
# token. MULTICA_* variables the agent should see are set explicitly below.
_STRIP_PREFIXES = ("MULTICA_",)
_STRIP_NAMES = frozenset(NOTIFY_ENV_VARS)
INSTRUCTIONS_FILE = "AGENTS.md"
EXIT_WAIT = 5.0
"""Seconds an agent gets to exit after closing stdout, when the exit grace is shorter."""


def work_dir(root: Path, task: Task) -> Path:
    """`<workspaces root>/<workspace id>/<short task id>/workdir`, created if missing."""
    workspace = _safe(task.workspace_id or "default")
    path = root / workspace / _safe(short_id(task.id)) / "workdir"
    return ensure_dir(path)


def _safe(part: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", part).strip(".")
    return cleaned or "_"


def build_prompt(task: Task) -> str:
    """The task's `prompt` when the server sent one, else one built from its fields."""
    if task.prompt:
        return task.prompt
    parts: list[str] = []
    if task.autopilot_title:
        parts.append(f"# {task.autopilot_title}")
    if task.autopilot_description:
        parts.append(task.autopilot_description)
    if task.issue_id:
        parts.append(f"You are working on issue {task.issue_id}.")
    if task.trigger_comment_content:
        parts.append(f"A comment asked for this:\n\n{task.trigger_comment_content}")
    if task.chat_message:
        parts.append(task.chat_message)
    if task.quick_create_prompt:
        parts.append(task.quick_create_prompt)
    return "\n\n".join(parts) or "Continue with the task."


def write_instructions(workdir: Path, instructions: str) -> None:
    """Put the agent's standing instructions where agent CLIs look for them."""
    if instructions:
        (workdir / INSTRUCTIONS_FILE).write_text(instructions + "\n", encoding="utf-8")


def agent_env(
    base: Mapping[str, str], task: Task, server_url: str, workdir: Path
) -> dict[str, str]:
    """The agent's environment: the daemon's minus its own secrets, plus the task's values."""
    env = {
        k: v for k, v in base.items() if not k.startswith(_STRIP_PREFIXES) and k not in _STRIP_NAMES
    }
    env.update(task.agent.custom_env)
    env.update(
        {
            "MULTICA_TOKEN": task.auth_token,
            "MULTICA_TASK_ID": task.id,
            "MULTICA_SERVER_URL": server_url,
            "MULTICA_WORKSPACE_ID": task.workspace_id,
            "MULTICA_AGENT_ID": task.agent_id or task.agent.id,
            "MULTICA_AGENT_NAME": task.agent.name,
            "MULTICA_WORKDIR": str(workdir),
        }
    )
    return env


def run_spec(
    task: Task, workdir: Path, env: dict[str, str], settings: Settings, observer: RunObserver
) -> RunSpec:
    """How to start the task's agent: prompt, work directory, environment, model, limits."""
    return RunSpec(
        prompt=build_prompt(task),
        workdir=workdir,
        env=env,
        task_id=task.id,
        model=task.agent.model,
        resume_session_id=task.prior_session_id,
        instructions=task.agent.instructions,
        extra_args=tuple(task.agent.custom_args),
        kill_grace=settings.kill_grace,
        # An agent that closed stdout after its final result gets the whole exit grace.
        exit_wait=max(EXIT_WAIT, settings.exit_grace),
        observer=observer,
    )
