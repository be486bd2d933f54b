"""The Pi backend: `pi -p --mode json`, one prompt per run, resumable by session id.

    pi -p --mode json [--model MODEL] [--thinking LEVEL] [configured args] [task args]
       [--session ID]

The prompt is read from stdin, which is closed after it (Pi reads a piped stdin to its end as
the prompt). Arguments that would change that are dropped from the configured and the task's
arguments (`backends.cli_args`): the daemon's own flags, `@file` inputs and positional
messages — Pi would add those to the prompt.

The model goes to `--model` whole (`provider/id`, a bare id, an id with slashes): Pi resolves
each, where splitting it into `--provider` would turn a gateway's `org/model` id into an
unknown provider. The runtime brief reaches Pi as the `AGENTS.md` it loads from the work
directory, so nothing is appended to its system prompt.

Sessions are Pi's own, kept where it keeps them (under the agent's `~/.pi/agent`, by work
directory); the session header's id is the session to resume, with `--session ID`. Pi finds
it only from the same work directory — in another it offers to fork it, which a run without a
terminal refuses — so a session it cannot resume here starts a fresh one (`backends.resume`).
"""

from __future__ import annotations

from types import MappingProxyType

from backends.base import RunSpec
from backends.cli_args import ArgRules, filter_args
from backends.models import Catalog
from backends.pi.events import PiEventParser
from backends.pi.models import pi_models
from backends.stdin_cli import StdinPromptCli

BASE_ARGS = ("-p", "--mode", "json")

# Set by a running Pi for its own tool processes; a daemon started from inside Pi must not
# hand it on.
SESSION_MARKERS = frozenset({"PI_CODING_AGENT"})

# The daemon's own flags, and Pi's flags that take no value (0.73.1).
ARGS = ArgRules(
    cli="pi",
    reserved={"-p", "--print", "--mode", "--session", "--fork", "--export", "--thinking"},
    alone={
        "-p", "--print", "-h", "--help", "-v", "--version", "-c", "--continue", "-r",
        "--resume", "--no-session", "-nt", "--no-tools", "-nbt", "--no-builtin-tools",
        "-ne", "--no-extensions", "-ns", "--no-skills", "-np", "--no-prompt-templates",
        "--no-themes", "-nc", "--no-context-files", "--verbose", "--offline",
    },
)  # fmt: skip


class PiBackend(StdinPromptCli):
    """Runs the Pi CLI for a task; resumes sessions and falls back when one is gone."""

    name = "pi"
    # None, as in Multica: 0.60.0, 0.65.2 and 0.73.1 pass the same real-CLI scenarios (0.7.6
    # answers no `--version`, so it is never found).
    min_version = ""
    tested_max = "0.73.1"
    session_markers = SESSION_MARKERS
    prefix_reserved = MappingProxyType({flag: flag not in ARGS.alone for flag in ARGS.reserved})

    async def models(self) -> Catalog:
        """Pi's catalog, over its RPC mode (else its `--list-models` table)."""
        return await pi_models(self)

    def parser(self, model: str, resume: str) -> PiEventParser:
        """A parser for one run's output."""
        return PiEventParser(model, resume, self.version, self.tested_max)

    def argv(self, spec: RunSpec, resume: str = "") -> list[str]:
        """The command line for one run (configured and task arguments filtered)."""
        argv = self.command(*BASE_ARGS)
        model = spec.model or self.model
        if model:
            argv += ["--model", model]
        if spec.thinking_level:
            argv += ["--thinking", spec.thinking_level]
        argv += filter_args(self.args, ARGS)
        argv += filter_args(spec.extra_args, ARGS)
        if resume:
            argv += ["--session", resume]
        return argv
