"""The Copilot backend: `copilot` in prompt mode, printing its session events as JSON lines.

    copilot --output-format json --allow-all --no-ask-user
            [--model MODEL] [--resume SESSION] [configured args] [task args]  < PROMPT

The prompt is written to stdin, which is then closed: with stdin not a terminal and no `-p`,
the CLI reads it to its end as the prompt and runs headless ("provide a prompt with -p or via
standard in", its own words for an empty one). Never `-p PROMPT`: `/proc/<pid>/cmdline` is
world-readable, and every local user would read the task's instructions (the npm package's
loader passes its argv on to the native binary, so both processes would show it).

`--allow-all` lets every tool, path and URL through and `--no-ask-user` keeps the agent from
asking anything back: a headless run must never wait, and isolation is the deployment's job, as
for the other backends. The runtime brief is the work directory's `AGENTS.md`, which the CLI
loads; instructions in the spec go first in the prompt (the CLI has no system-prompt flag).

A session the CLI does not know makes `--resume` fail at once ("No session, task, or name
matched"); the run then falls back to a fresh session (see `backends.resume`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import MappingProxyType

from backends.agent_cli import AgentCli
from backends.base import AgentRun, RunSpec
from backends.cli_args import drop_reserved
from backends.copilot.events import CopilotEventParser
from backends.copilot.models import copilot_models
from backends.models import Catalog
from backends.process import ProcessSpec
from backends.resume import Launch, start_session

BASE_ARGS = ("--output-format", "json", "--allow-all", "--no-ask-user")

# Flags the daemon owns: the prompt (a `-p` would take it off stdin), the output it parses,
# the session it resumes, headless mode (and not ACP, which prints no JSON events). A
# value-taking flag drops its value too.
_RESERVED_WITH_VALUE = ("-p", "--prompt", "--output-format", "--resume")
_RESERVED = ("--acp",)


class CopilotBackend(AgentCli):
    """Runs the Copilot CLI for a task; resumes sessions and falls back when one is gone."""

    name = "copilot"
    # The JSON envelope (`type`, `data`, a final `result` line) is stable from 1.0 on.
    min_version = "1.0.0"
    tested_max = "1.0.102"
    prefix_reserved = MappingProxyType(
        dict.fromkeys(_RESERVED_WITH_VALUE, True) | dict.fromkeys(_RESERVED, False)
    )

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the CLI; leaving the context kills its process tree."""
        return self._run(spec)

    async def models(self) -> Catalog:
        """The account's models, from the CLI's ACP session."""
        return await copilot_models(self)

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        model = spec.model or self.model

        def launch(resume: str) -> Launch:
            parser = CopilotEventParser(model, resume, self.version, self.tested_max)
            argv = self.argv(spec, resume)
            env = self.strip_markers(spec.env)
            return ProcessSpec.for_run(spec, argv, env, prompt_text(spec).encode()), parser

        async with start_session(self.name, spec.resume_session_id, launch) as run:
            yield run

    def argv(self, spec: RunSpec, resume: str = "") -> list[str]:
        """The command line for one run (configured and task arguments filtered); it holds
        no word of the prompt."""
        argv = self.command(*BASE_ARGS)
        model = spec.model or self.model
        if model:
            argv += ["--model", model]
        if resume:
            argv += ["--resume", resume]
        argv += filter_args(self.args)
        argv += filter_args(spec.extra_args)
        return argv


def prompt_text(spec: RunSpec) -> str:
    """What the CLI reads on stdin: the instructions first (it has no system-prompt flag)."""
    return f"{spec.instructions}\n\n{spec.prompt}" if spec.instructions else spec.prompt


def filter_args(args: Sequence[str]) -> list[str]:
    """Drop the flags the daemon sets itself (with their values)."""
    return drop_reserved(args, "copilot", _RESERVED_WITH_VALUE, _RESERVED)
