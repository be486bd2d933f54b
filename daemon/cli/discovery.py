"""Which agent backends this machine has: each candidate is asked for its version, bounded."""

from __future__ import annotations

import logging

import anyio

from backends.base import Backend
from backends.version import version_at_least
from daemon.config import Settings

log = logging.getLogger(__name__)

DETECT_TIMEOUT = 10.0


def candidates(settings: Settings) -> list[Backend]:
    """Every backend the settings make possible, whether or not its CLI is installed."""
    from backends.acp import AcpBackend
    from backends.acp.catalog import AGENTS
    from backends.claude import ClaudeBackend
    from backends.codex import CodexBackend
    from backends.command import CommandBackend
    from backends.copilot import CopilotBackend
    from backends.pi import PiBackend
    from backends.qwen import QwenBackend
    from backends.scripted import ScriptedBackend

    claude, codex, pi, qwen = settings.claude, settings.codex, settings.pi, settings.qwen
    user = settings.agent_identity
    found: list[Backend] = [
        ClaudeBackend(claude.path, claude.args, claude.model, detect_as=user),
        CodexBackend(codex.path, codex.args, codex.model, detect_as=user, mode=settings.codex_mode),
        PiBackend(pi.path, pi.args, pi.model, detect_as=user),
        QwenBackend(qwen.path, qwen.args, qwen.model, detect_as=user),
    ]
    copilot = settings.copilot
    found.append(CopilotBackend(copilot.path, copilot.args, copilot.model, detect_as=user))
    for agent in AGENTS:
        cli = settings.agent_cli(agent.name)
        found.append(AcpBackend(agent, cli.path, cli.args, cli.model, detect_as=user))
    if settings.command_path:
        found.append(CommandBackend(settings.command_path, settings.command_args))
    if settings.scripted_backend:
        found.append(ScriptedBackend())
    return found


async def detect(backends: list[Backend], bound: float = DETECT_TIMEOUT) -> dict[str, str]:
    """Ask every backend for its version at once; a wedged CLI costs at most `bound`."""
    versions: dict[str, str] = {}

    async def one(backend: Backend) -> None:
        version: str | None = None
        with anyio.move_on_after(bound) as scope:
            try:
                version = await backend.detect()
            except Exception as exc:  # a broken CLI must never stop the daemon starting
                log.warning("backend %s: detection failed: %s", backend.name, exc)
        if scope.cancelled_caught:
            log.warning("backend %s: no answer to --version within %ss", backend.name, bound)
        elif version and not version_at_least(version, needed := _min_version(backend)):
            log.warning(
                "backend %s: version %s found, %s or newer needed; not used",
                backend.name,
                version,
                needed,
            )
        elif version:
            versions[backend.name] = version
            log.info("backend %s: found version %s%s", backend.name, version, _untested(backend))
        else:
            log.info("backend %s: not available", backend.name)

    async with anyio.create_task_group() as tg:
        for backend in backends:
            tg.start_soon(one, backend)
    return versions


def _untested(backend: Backend) -> str:
    """What a found backend's log line adds when the daemon has never run its CLI."""
    why = getattr(getattr(backend, "agent", None), "untested", "")
    return f" (untested: {why})" if isinstance(why, str) and why else ""


def _min_version(backend: Backend) -> str:
    """The oldest CLI version a backend works with ("" = any: the command backend's path)."""
    needed = getattr(backend, "min_version", "")
    return needed if isinstance(needed, str) else ""


async def available(settings: Settings) -> dict[str, tuple[Backend, str]]:
    """The backends this machine can run, by name, each with the version it reported."""
    backends = candidates(settings)
    versions = await detect(backends)
    return {b.name: (b, versions[b.name]) for b in backends if b.name in versions}
