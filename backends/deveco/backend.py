"""The DevEco Code backend: `deveco run --format json`, one prompt per run, resumable.

    deveco run --format json --dangerously-skip-permissions --dir DIR [--model M]
               [--variant LEVEL] [--session SESSION] [configured args] [task args] PROMPT

As Multica's daemon runs it: `run` takes the prompt as its last word (it has no stdin mode),
`--dir` and `PWD` anchor its discovery of `AGENTS.md` and `.deveco/skills/` in the task's
directory (without them DevEco walks from the daemon's own), and permission prompts are
skipped. Arguments that would change the output, the anchor or the approvals are dropped.

DevEco is not served by a registry (it ships from its own repository), so its tests run the
parser on output of its documented format, OpenCode's `run --format json`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from backends.agent_cli import AgentCli
from backends.base import AgentRun, RunSpec
from backends.cli_args import ArgRules, filter_args
from backends.deveco.events import DevecoEventParser
from backends.deveco.models import deveco_models
from backends.models import Catalog
from backends.process import ProcessSpec, run_process

BASE_ARGS = ("run", "--format", "json", "--dangerously-skip-permissions")

ARGS = ArgRules(
    cli="deveco",
    reserved={"--format", "--dir", "--variant", "--dangerously-skip-permissions", "--session",
              "-s", "--continue", "-c"},
    alone={"--dangerously-skip-permissions", "--continue", "-c", "--share", "--print-logs",
           "-h", "--help", "-v", "--version"},
)  # fmt: skip


class DevecoBackend(AgentCli):
    """Runs DevEco Code for a task, resuming its session when asked."""

    name = "deveco"

    async def models(self) -> Catalog:
        """The models `deveco models` lists (`backends.deveco.models`)."""
        return await deveco_models(self)

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the CLI; leaving the context kills its process tree."""
        return self._run(spec)

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        model = spec.model or self.model
        parser = DevecoEventParser(model, spec.resume_session_id, self.version, self.tested_max)
        env = {**self.strip_markers(spec.env), "PWD": str(spec.workdir)}
        process = ProcessSpec.for_run(spec, self.argv(spec), env, b"")
        async with run_process(process, parser) as run:
            yield run

    def argv(self, spec: RunSpec) -> list[str]:
        """The command line for one run, the prompt last."""
        argv = self.command(*BASE_ARGS, "--dir", str(spec.workdir))
        model = spec.model or self.model
        if model:
            argv += ["--model", model]
        if spec.thinking_level:
            argv += ["--variant", spec.thinking_level]
        if spec.resume_session_id:
            argv += ["--session", spec.resume_session_id]
        argv += filter_args(self.args, ARGS)
        argv += filter_args(spec.extra_args, ARGS)
        return [*argv, spec.prompt]
