"""The Cursor Agent backend: `cursor-agent -p --output-format stream-json`, prompt on stdin.

    cursor-agent -p --output-format stream-json --yolo --workspace DIR [--model M]
                 [--resume SESSION] [configured args] [task args]

As Multica's daemon runs it: `-p` is print mode and the prompt is read from stdin to its end
(no prompt word on the command line, where a launcher could split it), `--yolo` runs every
tool without asking, `--workspace` anchors it in the task's directory. Arguments that would
change the prompt, the output or the approvals are dropped from the configured and the task's
arguments. The runtime brief is the `AGENTS.md` it loads from the work directory.

Sessions are Cursor's own; `--resume ID` continues one. Cursor says nothing the daemon can
tell apart when the session is gone (as in Multica, a refused resume is not detected).
Current CLIs print the `result` line and keep a worker process alive: the result ends the
run, and the exit grace then stops the process tree.
"""

from __future__ import annotations

from backends.base import RunSpec
from backends.cli_args import ArgRules, filter_args
from backends.cursor.events import CursorStreamParser
from backends.cursor.models import cursor_models
from backends.models import Catalog
from backends.stdin_cli import StdinPromptCli

BASE_ARGS = ("-p", "--output-format", "stream-json", "--yolo")

# The daemon's own flags, and cursor-agent's flags that take no value.
ARGS = ArgRules(
    cli="cursor-agent",
    reserved={"-p", "--print", "--output-format", "--yolo", "-f", "--force", "--resume",
              "--workspace", "--stream-partial-output"},
    alone={"-p", "--print", "--yolo", "-f", "--force", "-h", "--help", "-v", "--version",
           "--stream-partial-output", "--fullscreen", "--cloud", "-c"},
)  # fmt: skip


class CursorBackend(StdinPromptCli):
    """Runs Cursor Agent for a task, resuming its session when asked."""

    name = "cursor"
    executable = "cursor-agent"
    min_version = ""
    tested_max = ""
    session_markers = frozenset({"CURSOR_AGENT", "CURSOR_TRACE_ID"})

    async def models(self) -> Catalog:
        """The models `cursor-agent --list-models` lists (`backends.cursor.models`)."""
        return await cursor_models(self)

    def parser(self, model: str, resume: str) -> CursorStreamParser:
        """A parser for one run's output."""
        return CursorStreamParser(model, resume, self.version, self.tested_max)

    def argv(self, spec: RunSpec, resume: str = "") -> list[str]:
        """The command line for one run (configured and task arguments filtered)."""
        argv = self.command(*BASE_ARGS, "--workspace", str(spec.workdir))
        model = spec.model or self.model
        if model:
            argv += ["--model", model]
        if resume:
            argv += ["--resume", resume]
        argv += filter_args(self.args, ARGS)
        argv += filter_args(spec.extra_args, ARGS)
        return argv
