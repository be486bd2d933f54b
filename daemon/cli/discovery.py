"""Which agent backends this machine has: each candidate is asked for its version, bounded."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable

import anyio

from backends.agent_cli import executable_found
from backends.base import Backend
from backends.cli_trust import UntrustedCliError
from backends.version import version_at_least
from daemon.config import AgentCliSettings, Settings

log = logging.getLogger(__name__)

DETECT_TIMEOUT = 10.0


_OTHER_CLIS = ("cursor", "codebuddy", "openclaw", "antigravity", "deveco", "dsh", "omp")
"""Multica's other CLIs by runtime type, each in its own folder `backends/<type>` with its
`<Type>Backend`."""


def _cli_backend(name: str) -> Callable[..., Backend]:
    """The backend class of one of `_OTHER_CLIS`, imported when asked."""
    kind: Callable[..., Backend] = getattr(
        importlib.import_module(f"backends.{name}"), f"{name.capitalize()}Backend"
    )
    return kind


def candidates(settings: Settings, *, installed: bool = False) -> list[Backend]:
    """Every backend the settings make possible, whether or not its CLI is installed; with
    `installed`, only the named CLIs whose executable the PATH finds now (and the command and
    scripted backends when set).

    Each backend's module is imported only for a CLI that is a candidate: sixteen of them cost
    start-up about 11 ms before the first register, on a machine with one or two installed.
    """
    user = settings.agent_identity
    found: list[Backend] = []

    def wanted(name: str, default: str = "") -> AgentCliSettings | None:
        cli = settings.agent_cli(name)
        if installed and not executable_found(cli.path or default):
            return None
        return cli

    if (claude := wanted("claude")) is not None:
        from backends.claude import ClaudeBackend

        found.append(ClaudeBackend(claude.path, claude.args, claude.model, detect_as=user))
    if (codex := wanted("codex")) is not None:
        from backends.codex import CodexBackend

        mode = settings.codex_mode
        found.append(CodexBackend(codex.path, codex.args, codex.model, detect_as=user, mode=mode))
    if (pi := wanted("pi")) is not None:
        from backends.pi import PiBackend

        found.append(PiBackend(pi.path, pi.args, pi.model, detect_as=user))
    if (qwen := wanted("qwen")) is not None:
        from backends.qwen import QwenBackend

        found.append(QwenBackend(qwen.path, qwen.args, qwen.model, detect_as=user))
    if (copilot := wanted("copilot")) is not None:
        from backends.copilot import CopilotBackend

        found.append(CopilotBackend(copilot.path, copilot.args, copilot.model, detect_as=user))
    for name in _OTHER_CLIS:
        if (cli := wanted(name)) is not None:
            found.append(_cli_backend(name)(cli.path, cli.args, cli.model, detect_as=user))
    from backends.acp.catalog import AGENTS

    for agent in AGENTS:
        if (cli := wanted(agent.name, agent.command)) is not None:
            from backends.acp import AcpBackend

            found.append(AcpBackend(agent, cli.path, cli.args, cli.model, detect_as=user))
    if settings.command_path:
        from backends.command import CommandBackend

        strict = user is not None
        found.append(CommandBackend(settings.command_path, settings.command_args, strict=strict))
    if settings.scripted_backend:
        from backends.scripted import ScriptedBackend

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
            except UntrustedCliError as exc:
                log.warning("backend %s: refused, not offered: %s", backend.name, exc)
                return
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
    backends = candidates(settings, installed=True)
    versions = await detect(backends)
    return {b.name: (b, versions[b.name]) for b in backends if b.name in versions}
