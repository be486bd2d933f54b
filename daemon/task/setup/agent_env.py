"""The environment an agent runs in: what the `multica` CLI needs inside a task, nothing more.

Built as Multica's own daemon builds it (`taskMulticaEnvironment` in the Go daemon), from
explicit inputs so it can be checked without running anything. The daemon's own settings and
credentials never reach the agent: it gets only its task's token.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from daemon.boundary.beneath import Owner, ensure_dir_under, fresh_dir_under
from daemon.errors import TaskInputError, TaskTokenError
from daemon.ops.sdnotify import NOTIFY_ENV_VARS
from daemon.protocol.models import Task

TASK_TOKEN_PREFIX = "mat_"
TEMP_PREFIX = "multica-task-"

_OWN_NAMES = frozenset(NOTIFY_ENV_VARS)
# Names the agent's `custom_env` may not set (compared upper-case). Multica's daemon keeps the
# first group (`isBlockedEnvKey`): the paths the task is isolated by and where agents keep
# their state. The rest run code inside the agent's CLI before any of its own checks (loader
# and interpreter hooks), lift its guards (IS_SANDBOX lets Claude Code skip permissions as
# root), or speak for the daemon (systemd's notify socket).
_MULTICAS_NAMES = {
    *("HOME", "PATH", "USER", "SHELL", "TERM", "TMPDIR", "TMP", "TEMP", "CODEX_HOME"),
    *("REASONIX_STATE_HOME", "CURSOR_DATA_DIR", "CURSOR_MCP_AUTH_SOURCE"),
    *("OPENCLAW_CONFIG_PATH", "OPENCLAW_INCLUDE_ROOTS"),
}
_HOOK_NAMES = {
    *("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONINSPECT"),
    *("PYTHONWARNINGS", "PYTHONBREAKPOINT", "PYTHONEXECUTABLE", "PYTHONPLATLIBDIR"),
    *("BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PROMPT_COMMAND", "PS4", "IFS"),
    *("NODE_OPTIONS", "NODE_PATH", "NODE_TLS_REJECT_UNAUTHORIZED"),
    *("PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB"),
    *("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GCONV_PATH"),
    *("IS_SANDBOX", "GIT_EXEC_PATH"),
}
_BLOCKED_NAMES = frozenset(_MULTICAS_NAMES | _HOOK_NAMES | _OWN_NAMES)
_BLOCKED_PREFIXES = ("MULTICA_", "AGENT_DAEMON_", "LD_", "DYLD_", "BASH_FUNC_")


@dataclass(frozen=True, slots=True)
class TaskPlace:
    """Where one task runs on this machine, and how its agent reaches the daemon and server."""

    server_url: str
    work_dir: Path
    temp_dir: Path
    config_root: Path
    workspaces_root: Path
    health_port: int
    slot: int
    multica_bin: Path | None = None
    """The `multica` executable when one is installed: its directory goes first on PATH."""
    require_task_token: bool = False
    """True against a Multica server, whose tokens for agents are task-scoped (`mat_`)."""


def task_token(task: Task, require_task_token: bool) -> str:
    """The token the agent gets: the task's own, and with `require_task_token` only a `mat_` one.

    Multica's daemon refuses to start an agent otherwise rather than fall back to its own
    credential, which would let the agent act as the runtime's owner.
    """
    token = task.auth_token.strip()
    if require_task_token:
        if not token:
            raise TaskTokenError("server did not provide a task-scoped auth token")
        if not token.startswith(TASK_TOKEN_PREFIX):
            raise TaskTokenError("server provided an auth token that is not task-scoped")
    return token


def blocked_custom_keys(custom_env: Mapping[str, str]) -> list[str]:
    """The names in an agent's `custom_env` that are skipped, sorted (for one log line)."""
    return sorted(k for k in custom_env if _blocked(k))


def check_custom_env(custom_env: Mapping[str, str]) -> None:
    """`TaskInputError` for a name no environment can hold (empty, with `=` or NUL) or a value
    with NUL: the task is invalid input, not a daemon error."""
    for name, value in custom_env.items():
        if not name or "=" in name or "\0" in name:
            raise TaskInputError(
                f"invalid input: custom_env name {name[:64]!r} is not a variable name"
            )
        if "\0" in value:
            raise TaskInputError(f"invalid input: custom_env {name[:64]!r} holds a NUL byte")


def _blocked(name: str) -> bool:
    upper = name.upper()
    return upper.startswith(_BLOCKED_PREFIXES) or upper in _BLOCKED_NAMES


def _daemons_own(name: str) -> bool:
    return name.upper().startswith("MULTICA_") or name in _OWN_NAMES


def public_url(url: str) -> str:
    """`url` without a user or password in it: the agent gets the address, not the login."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit(parts._replace(netloc=netloc))


def agent_env(base: Mapping[str, str], task: Task, place: TaskPlace) -> dict[str, str]:
    """The agent's environment: `base` minus the daemon's own variables, plus the task's."""
    env = {k: v for k, v in base.items() if not _daemons_own(k)}
    temp = str(place.temp_dir)
    env.update(
        {
            "MULTICA_TOKEN": task_token(task, place.require_task_token),
            "MULTICA_SERVER_URL": public_url(place.server_url),
            "MULTICA_WORKSPACE_ID": task.workspace_id,
            "MULTICA_AGENT_ID": task.agent_id or task.agent.id,
            "MULTICA_AGENT_NAME": task.agent.name,
            "MULTICA_TASK_ID": task.id,
            "MULTICA_DAEMON_PORT": str(place.health_port),
            "MULTICA_TASK_SLOT": str(place.slot),
            "MULTICA_TASK_CONFIG_ROOT": str(place.config_root),
            "MULTICA_TASK_WORKSPACES_ROOT": str(place.workspaces_root),
            "MULTICA_WORKDIR": str(place.work_dir),
            "TMPDIR": temp,
            "TMP": temp,
            "TEMP": temp,
        }
    )
    env.update(_run_markers(task))
    if place.multica_bin is not None:
        # Some agents run tools in a sandbox with a reduced PATH; `multica` must still resolve.
        # Its directory once: already on the inherited PATH, it only moves to the front.
        first = str(place.multica_bin.parent)
        rest = [p for p in base.get("PATH", "").split(os.pathsep) if p and p != first]
        env["PATH"] = os.pathsep.join([first, *rest])
    check_custom_env(task.agent.custom_env)
    env.update({k: v for k, v in task.agent.custom_env.items() if not _blocked(k)})
    return env


def _run_markers(task: Task) -> dict[str, str]:
    """What the `multica` CLI stamps on what the agent creates, as Multica's daemon sets it.

    A quick-create's `issue create` marks the new issue with this task's id, which is how the
    server finds the issue the task made: without it the server reports the quick-create as
    failed although the issue exists. An autopilot run's ids tie its work to the run.
    """
    markers: dict[str, str] = {}
    if task.autopilot_run_id:
        markers["MULTICA_AUTOPILOT_RUN_ID"] = task.autopilot_run_id
    if task.autopilot_id:
        markers["MULTICA_AUTOPILOT_ID"] = task.autopilot_id
    if task.quick_create_prompt:
        markers["MULTICA_QUICK_CREATE_TASK_ID"] = task.id
        if task.quick_create_attachment_ids:
            ids = json.dumps(task.quick_create_attachment_ids)
            markers["MULTICA_QUICK_CREATE_ATTACHMENT_IDS"] = ids
    return markers


def make_temp_dir(base: Path, owner: Owner | None = None) -> Path:
    """A fresh private (0700) temporary directory for one task under `base` (`owner`'s).

    Made and handed over through handles: `base` (the task's directory) may be the agent's
    already, and a name it swapped for a link must not make root chmod or chown the target.
    """
    ensure_dir_under(base.parent, base.name, owner=owner)
    return fresh_dir_under(base, TEMP_PREFIX, owner)
