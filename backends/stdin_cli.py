"""An agent CLI given its prompt on stdin, one process per run, resumable by session id.

Pi and Qwen Code run this way: the prompt is written to stdin, which is then closed (a long
prompt stays off the command line and out of `ps`); the CLI's own session markers are left
out of its environment; a session the CLI no longer has falls back to a fresh one
(`backends.resume`). A backend says how its command line reads (`argv`) and what reads its
output (`parser`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from backends.agent_cli import AgentCli
from backends.base import AgentRun, RunSpec
from backends.process import ProcessSpec
from backends.resume import Launch, ResumableParser, start_session


class StdinPromptCli(AgentCli):
    """Runs the CLI for a task; resumes sessions and falls back when one is gone."""

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the CLI; leaving the context kills its process tree."""
        return self._run(spec)

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        def launch(resume: str) -> Launch:
            parser = self.parser(spec.model or self.model, resume)
            argv = self.argv(spec, resume)
            env = self.strip_markers(spec.env)
            return ProcessSpec.for_run(spec, argv, env, spec.prompt.encode()), parser

        async with start_session(self.name, spec.resume_session_id, launch) as run:
            yield run

    def argv(self, spec: RunSpec, resume: str = "") -> list[str]:
        """The command line for one run, resuming `resume` when it is not ""."""
        raise NotImplementedError

    def parser(self, model: str, resume: str) -> ResumableParser:
        """A parser for one run's output, `resume` the session the run was asked to resume."""
        raise NotImplementedError
