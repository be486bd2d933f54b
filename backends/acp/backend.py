"""The ACP backend: any agent CLI that speaks the Agent Client Protocol over stdio.

    <path> <acp args> [<model flag> MODEL] [configured args] [task args]

One client serves every such CLI; what differs between them is an `AcpAgent` table entry.
The CLI starts in its own session (backends/process); `session.AcpSession` drives it through
one prompt turn. Leaving the context before the turn is answered sends `session/cancel` and
gives the agent a moment to stop cleanly, then kills the whole tree as for every backend —
the agents run their shell tools in sessions of their own, which only the tree kill reaches.

Instructions in the spec go first in the prompt, as a text block of their own: ACP has no
system prompt. The daemon itself gives none (the runtime brief is in the work directory's
`AGENTS.md`, or `GEMINI.md` for Gemini CLI). An MCP configuration in the spec becomes the
session's `mcpServers`, built from the task's configuration as held in memory since setup,
never from the file in the task's directory (an agent user could swap it for a link).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import anyio

from backends.acp.agent import AcpAgent
from backends.acp.discovery import session_models
from backends.acp.first_start import FirstStarts, data_dir
from backends.agent_cli import AgentCli
from backends.base import AgentRun, RunSpec
from backends.models import Catalog
from backends.process import ProcessRun, ProcessSpec, run_process
from backends.process.identity import AgentUser

if TYPE_CHECKING:
    from backends.acp.session import AcpSession

log = logging.getLogger(__name__)

CANCEL_WAIT = 1.0
"""Seconds an agent gets to answer `session/cancel` before its tree is killed."""


class AcpBackend(AgentCli):
    """Runs one ACP agent CLI for a task: one session, one prompt turn."""

    def __init__(
        self,
        agent: AcpAgent,
        path: str = "",
        args: Sequence[str] = (),
        model: str = "",
        *,
        detect_env: Mapping[str, str] | None = None,
        detect_as: AgentUser | None = None,
    ) -> None:
        super().__init__(
            path or agent.command, args, model, detect_env=detect_env, detect_as=detect_as
        )
        self.agent = agent
        self.name = agent.name
        self.min_version = agent.min_version
        self.probe_env = agent.probe_env
        # The words that put the CLI in ACP mode are given after the prefix already.
        self.prefix_reserved = {a: False for a in agent.acp_args if a.startswith("-")}
        self._first_starts = FirstStarts()

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the CLI; leaving the context cancels the turn and kills its process tree."""
        return self._run(spec)

    async def models(self) -> Catalog:
        """The agent's models: as its entry reads them, else from its ACP session (none
        when that fails: the model is entered by hand)."""
        if self.agent.list_models is not None:
            return await self.agent.list_models(self)
        found = await session_models(self, self.agent.acp_args, effort=self.agent.effort)
        return Catalog.of(found or [])

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        # The protocol's session is imported by the first run: detecting the CLI at start-up,
        # before the daemon registers, needs none of it (tests/daemon/test_imports.py).
        from backends.acp.session import AcpSession, Turn

        model = spec.model or self.model
        servers = mcp_servers(spec.mcp)
        prompt = (spec.instructions, spec.prompt)
        effort = spec.thinking_level if self.agent.effort else ""
        if spec.thinking_level and not effort:
            log.warning(
                "%s: no reasoning effort can be set; %r not applied", self.name, spec.thinking_level
            )
        turn = Turn(prompt, str(spec.workdir), spec.resume_session_id, model, servers, effort)
        session = AcpSession(self.agent, turn)
        process = ProcessSpec.for_run(
            spec, self.argv(spec), self.env(spec), session.first_line(), keep_stdin_open=True
        )
        key = data_dir(process.env) if self.agent.first_start_alone else ""
        async with (
            self._first_starts.turn(key, session.opened) if key else nullcontext(),
            run_process(process, session) as run,
        ):
            try:
                yield run
            finally:
                with anyio.CancelScope(shield=True):
                    await _cancel(run, session, min(CANCEL_WAIT, spec.kill_grace / 2))

    def argv(self, spec: RunSpec) -> list[str]:
        """The command line for one run (configured and task arguments filtered)."""
        argv = self.command(*self.agent.acp_args)
        model = spec.model or self.model
        if model and self.agent.model_flag:
            argv += [self.agent.model_flag, model]
        argv += self._filter(self.args)
        argv += self._filter(spec.extra_args)
        return argv

    def env(self, spec: RunSpec) -> dict[str, str]:
        """The task's environment plus what the CLI needs unattended, `PWD` the work dir."""
        # Some CLIs (OpenCode) take PWD over their actual directory to find the project.
        return {**spec.env, **self.agent.env, "PWD": str(spec.workdir)}

    def _filter(self, args: Sequence[str]) -> list[str]:
        kept = [a for a in args if a not in self.agent.acp_args]
        if len(kept) != len(args):
            log.warning(
                "%s: ignoring %s in the arguments (always given)", self.name, self.agent.acp_args
            )
        return kept


async def _cancel(run: ProcessRun, session: AcpSession, wait: float) -> None:
    """Ask the agent to stop a running turn, and wait (bounded) for its answer."""
    line = session.cancel_line()
    if line is None:
        return
    try:
        await run.write_line(line)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return  # its stdin is gone: only the kill is left
    with anyio.move_on_after(wait):
        await session.answered.wait()


def mcp_servers(config: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The MCP servers of a Claude-style configuration as ACP's `mcpServers` list."""
    servers = config.get("mcpServers") if config is not None else None
    if not isinstance(servers, dict):
        return []
    out: list[dict[str, Any]] = []
    for name, server in servers.items():
        if not isinstance(server, dict):
            continue
        if isinstance(server.get("url"), str):
            kind = "sse" if server.get("type") == "sse" else "http"
            headers = server.get("headers") or {}
            out.append(
                {
                    "type": kind,
                    "name": name,
                    "url": server["url"],
                    "headers": [{"name": k, "value": str(v)} for k, v in headers.items()],
                }
            )
        elif isinstance(server.get("command"), str):
            env = server.get("env") or {}
            out.append(
                {
                    "name": name,
                    "command": server["command"],
                    "args": [str(a) for a in server.get("args") or []],
                    "env": [{"name": k, "value": str(v)} for k, v in env.items()],
                }
            )
    return out
