"""The Claude Code backend: `claude -p` speaking stream-json both ways.

    claude -p --output-format stream-json --input-format stream-json --verbose
           --permission-mode bypassPermissions --disallowedTools AskUserQuestion
           [--mcp-config FILE --strict-mcp-config]
           [--model M] [--effort LEVEL] [--resume SESSION] [--append-system-prompt-file FILE]
           [configured args] [task args]

The prompt goes in as one stream-json user message, written by the process helper while it is
already reading stdout (writing first deadlocks the CLI at start-up). Stdin stays open so
`control_request` lines can be answered; the parser closes it after the `result` line, and
the CLI exits.

Instructions in the spec go in through `--append-system-prompt-file`, never on the command
line (`/proc/<pid>/cmdline` is every local user's to read), in a private folder of the agent
user's, handed over through handles (daemon/boundary/beneath.py). The daemon itself gives none:
as Multica's daemon, it writes the runtime brief into the work directory's `CLAUDE.md`, which
the CLI loads, so the brief is not sent twice. An MCP configuration in the spec is the
agent's whole set of servers (`--strict-mcp-config`), and configured arguments may not name
another one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from pathlib import Path
from types import MappingProxyType

from backends.agent_cli import AgentCli
from backends.base import AgentRun, RunSpec
from backends.claude.models import claude_models
from backends.claude.stream import ClaudeStreamParser
from backends.cli_args import drop_reserved
from backends.models import Catalog
from backends.process import ProcessSpec
from backends.process.identity import AgentUser
from backends.resume import Launch, start_session
from daemon.boundary.beneath import fresh_dir_under, opened_dir, remove_under, write_at

BASE_ARGS = (
    "-p",
    "--output-format",
    "stream-json",
    "--input-format",
    "stream-json",
    "--verbose",
    "--permission-mode",
    "bypassPermissions",
    # Claude Code's question tool waits for a person at a terminal; headless, the agent gets an
    # empty answer and goes on guessing, and the user never sees the question. As in Multica,
    # questions belong in the comments, which the brief tells the agent.
    "--disallowedTools",
    "AskUserQuestion",
)

# Set by a running Claude Code for its own tool processes. A daemon started from inside a
# Claude Code session must not hand them on: the agent would think it is a nested child
# session of someone else's.
SESSION_MARKERS = frozenset(
    {
        "CLAUDECODE",
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_CODE_SESSION_ID",
        "CLAUDE_CODE_CHILD_SESSION",
        "CLAUDE_CODE_CHILD_NOTES_DIR",
        "CLAUDE_CODE_EXECPATH",
        "CLAUDE_CODE_MESSAGING_SOCKET",
        "CLAUDE_CODE_MESSAGING_TOKEN",
        "CLAUDE_CODE_SESSION_ATTENDED",
        "CLAUDE_CODE_SSE_PORT",
        "CLAUDE_PID",
        "AI_AGENT",
    }
)

# The daemon parses stream-json, owns the MCP set and the effort (the agent's thinking level);
# configured arguments may not change them.
_RESERVED_FLAGS = ("--output-format", "--input-format", "--mcp-config", "--effort")

_INSTRUCTIONS = "instructions.md"


class ClaudeBackend(AgentCli):
    """Runs the Claude Code CLI for a task; resumes sessions and falls back when one is gone."""

    name = "claude"
    base_args: tuple[str, ...] = BASE_ARGS
    """What every run's command line starts with (a fork may ask for more)."""
    parser_type: type[ClaudeStreamParser] = ClaudeStreamParser
    strict_mcp = True
    """A task's MCP servers replace the user's own (`--strict-mcp-config`), not add to them."""
    min_version = "2.0.0"
    tested_max = "2.1.332"
    session_markers = SESSION_MARKERS
    prefix_reserved = MappingProxyType(
        {"-p": False, "--permission-mode": True} | dict.fromkeys(_RESERVED_FLAGS, True)
    )

    # AgentCli's signature again, with `is_root` added: spelt out so the type checker sees
    # every argument, not forwarded through **kwargs.
    def __init__(
        self,
        path: str | None = None,
        args: Sequence[str] = (),
        model: str = "",
        *,
        detect_env: Mapping[str, str] | None = None,
        is_root: bool | None = None,
        detect_as: AgentUser | None = None,
    ) -> None:
        super().__init__(path, args, model, detect_env=detect_env, detect_as=detect_as)
        # As root the CLI refuses bypassPermissions unless IS_SANDBOX=1 says it is contained.
        self._is_root = os.geteuid() == 0 if is_root is None else is_root

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the CLI; leaving the context kills its process tree."""
        return self._run(spec)

    async def models(self) -> Catalog:
        """The models Claude Code takes, with the efforts its `--help` names."""
        return await claude_models(self)

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        with ExitStack() as scratch:
            instructions = _instruction_args(spec.instructions, scratch, spec.user)

            def launch(resume: str) -> Launch:
                return self._spec(spec, resume, instructions), self.parser_type(
                    resume, self.version, self.tested_max
                )

            async with start_session(self.name, spec.resume_session_id, launch) as run:
                yield run

    def argv(self, spec: RunSpec, resume: str = "", instructions: Sequence[str] = ()) -> list[str]:
        """The command line for one run (configured and task arguments filtered)."""
        argv = self.command(*self.base_args)
        if spec.mcp_config is not None:
            argv += ["--mcp-config", str(spec.mcp_config)]
            argv += ["--strict-mcp-config"] if self.strict_mcp else []
        if spec.settings_file is not None:
            argv += ["--settings", str(spec.settings_file)]
        model = spec.model or self.model
        if model:
            argv += ["--model", model]
        if spec.thinking_level:
            argv += ["--effort", spec.thinking_level]
        if resume:
            argv += ["--resume", resume]
        argv += instructions
        argv += filter_args(self.args)
        argv += filter_args(spec.extra_args)
        return argv

    def env(self, spec: RunSpec) -> dict[str, str]:
        """The agent environment without Claude Code's session markers (plus IS_SANDBOX as root)."""
        env = self.strip_markers(spec.env)
        # An agent user runs the CLI unprivileged: bypass mode needs no sandbox claim then.
        if self._is_root and spec.user is None:
            # Set, not defaulted: a host's own IS_SANDBOX (e.g. `yes`) is not the value the
            # CLI accepts, and keeping it failed every task in under a second.
            env["IS_SANDBOX"] = "1"
        return env

    def _spec(self, spec: RunSpec, resume: str, instructions: Sequence[str]) -> ProcessSpec:
        argv = self.argv(spec, resume, instructions)
        stdin = prompt_line(spec.prompt)
        return ProcessSpec.for_run(spec, argv, self.env(spec), stdin, keep_stdin_open=True)


def prompt_line(prompt: str) -> bytes:
    """The prompt as one stream-json user message."""
    message = {"type": "user", "message": {"role": "user", "content": prompt}}
    return (json.dumps(message) + "\n").encode()


def filter_args(args: Sequence[str]) -> list[str]:
    """Drop `--output-format`, `--input-format`, `--mcp-config` and `--effort` with their
    values."""
    return drop_reserved(args, "claude", _RESERVED_FLAGS)


def _instruction_args(
    instructions: str, scratch: ExitStack, user: AgentUser | None = None
) -> list[str]:
    """The instruction arguments: a file (removed with `scratch`) in a fresh 0700 folder, the
    agent user's when there is one."""
    if not instructions:
        return []
    temp = Path(tempfile.gettempdir())
    folder = fresh_dir_under(temp, "agent-daemon-claude-")
    scratch.callback(remove_under, temp, folder.name)
    owner = user.owner if user is not None else None
    with opened_dir(folder) as fd:
        # The file is the user's before the folder is: once the folder is, the user's agents
        # (another task's, watching /tmp) could swap a name in it for a link.
        write_at(fd, _INSTRUCTIONS, instructions.encode(), owner=owner)
        if owner is not None:
            os.fchown(fd, *owner)
    return ["--append-system-prompt-file", str(folder / _INSTRUCTIONS)]
