"""The OpenClaw backend: `openclaw agent --local --json`, one message per run.

    openclaw agent --local --json --session-id SESSION [--agent AGENT]
                   [configured args] [task args] --message PROMPT

As Multica's daemon runs it: `--local` runs the agent loop in the process (no gateway), the
answer comes as JSON (`backends.openclaw.output`), the session id is the daemon's to choose —
a fresh run gets `multica-<time>`, a resumed one the id it had. OpenClaw takes no model flag:
an agent is bound to its model in OpenClaw's own config, so a task's model names the agent
(`--agent`), unless the arguments already name one. OpenClaw reads no brief file from the
work directory, so the runtime brief is in the prompt (as in Multica). Arguments the daemon
sets itself (`--local`, `--json`, `--session-id`, `--message`, and the `--model` and
`--system-prompt` OpenClaw does not take) are dropped.

Multica also writes a per-task OpenClaw config pinning the agent's workspace to the task's
directory; this backend does not (the agent works in OpenClaw's configured workspace).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from backends.agent_cli import AgentCli
from backends.base import AgentRun, RunSpec
from backends.cli_args import ArgRules, filter_args
from backends.models import Catalog
from backends.openclaw.agents import openclaw_agents
from backends.openclaw.output import OpenclawParser
from backends.process import ProcessSpec, run_process

ARGS = ArgRules(
    cli="openclaw",
    reserved={"--local", "--json", "--session-id", "--message", "-m", "--model",
              "--system-prompt"},
    alone={"--local", "--json", "--verbose", "-h", "--help", "--deliver"},
)  # fmt: skip


class OpenclawBackend(AgentCli):
    """Runs OpenClaw for a task, continuing its session when asked."""

    name = "openclaw"
    min_version = "2026.5.5"

    async def models(self) -> Catalog:
        """OpenClaw's agents, which a task's model names (`backends.openclaw.agents`)."""
        return await openclaw_agents(self)

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the CLI; leaving the context kills its process tree."""
        return self._run(spec)

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        session = spec.resume_session_id or f"multica-{time.time_ns()}"
        model = spec.model or self.model
        parser = OpenclawParser(model, session)
        env = self.strip_markers(spec.env)
        process = ProcessSpec.for_run(spec, self.argv(spec, session), env, b"")
        async with run_process(process, parser) as run:
            yield run

    def argv(self, spec: RunSpec, session: str) -> list[str]:
        """The command line for one run, the prompt last."""
        argv = self.command("agent", "--local", "--json", "--session-id", session)
        extra = [*filter_args(self.args, ARGS), *filter_args(spec.extra_args, ARGS)]
        model = spec.model or self.model
        if model and not any(a == "--agent" or a.startswith("--agent=") for a in extra):
            argv += ["--agent", model]
        prompt = f"{spec.instructions}\n\n{spec.prompt}" if spec.instructions else spec.prompt
        return [*argv, *extra, "--message", prompt]
