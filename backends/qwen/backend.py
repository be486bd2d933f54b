"""The Qwen Code backend: `qwen --output-format stream-json`, one prompt per run, resumable.

    qwen --output-format stream-json --yolo [--model MODEL] [--mcp-config FILE]
         [configured args] [task args] [--resume SESSION]

Stream-json rather than ACP (`qwen --acp`): both carry a tool call as it starts and as it
ends — stream-json prints the model's message, tool_use included, before the tool runs, and
the tool_result after (seen with a 3 s command: 5 s apart) — and stream-json is what Multica's
own daemon runs, so a session id means the same to both, one process per task, no handshake.
It is Claude Code's format, so the parser reads it with Claude's content blocks.

The prompt is read from stdin, closed after it (Multica passes it with `-p`: stdin keeps a
long prompt off the command line and out of `ps`). `--yolo` runs every tool without asking:
headless, Qwen Code would otherwise leave out the tools that need approval (shell, edits) —
isolation is the deployment's job, as for the other agents. Arguments that would change the
prompt, the output, the model, the MCP servers or the approvals are dropped from the
configured and the task's arguments (`backends.cli_args`); `--safe-mode` too, which would skip
the brief. The runtime brief is the `QWEN.md` Qwen Code loads from the work directory.

Sessions are Qwen Code's own, kept under the agent's `~/.qwen` per project directory; one it
does not have for this directory makes `--resume` fail before any event, and the run falls
back to a fresh session (`backends.resume`).
"""

from __future__ import annotations

from types import MappingProxyType

from backends.base import RunSpec
from backends.cli_args import ArgRules, filter_args
from backends.qwen.events import QwenStreamParser
from backends.stdin_cli import StdinPromptCli

BASE_ARGS = ("--output-format", "stream-json", "--yolo")

# Set by a running Qwen Code for the commands its shell tool runs.
SESSION_MARKERS = frozenset({"QWEN_CODE", "QWEN_CODE_NO_RELAUNCH"})

# The daemon's own flags, and Qwen Code's flags that take no value (0.24.4).
ARGS = ArgRules(
    cli="qwen",
    reserved={
        "-p", "--prompt", "-i", "--prompt-interactive", "-o", "--output-format", "-r",
        "--resume", "-c", "--continue", "--session-id", "--fork-session", "--acp",
        "--chat-recording", "-y", "--yolo", "--approval-mode", "--input-format",
        "--include-partial-messages", "-m", "--model", "--mcp-config", "--safe-mode",
        "--core-tools",
    },
    alone={
        "-c", "--continue", "--fork-session", "--acp", "--chat-recording", "-y", "--yolo",
        "--include-partial-messages", "-d", "--debug", "-s", "--sandbox", "--checkpointing",
        "--screen-reader", "--openai-logging", "-l", "--list-extensions", "-h", "--help",
        "-v", "--version", "--safe-mode",
    },
)  # fmt: skip


class QwenBackend(StdinPromptCli):
    """Runs Qwen Code for a task; resumes sessions and falls back when one is gone."""

    name = "qwen"
    # Multica's floor, the version whose stream-json it verified; 0.21.2 (the oldest the
    # registry here serves above it) passes the same real-CLI scenarios as 0.24.4.
    min_version = "0.20.0"
    tested_max = "0.24.4"
    session_markers = SESSION_MARKERS
    prefix_reserved = MappingProxyType({flag: flag not in ARGS.alone for flag in ARGS.reserved})

    def parser(self, model: str, resume: str) -> QwenStreamParser:
        """A parser for one run's output."""
        return QwenStreamParser(model, resume, self.version, self.tested_max)

    def argv(self, spec: RunSpec, resume: str = "") -> list[str]:
        """The command line for one run (configured and task arguments filtered)."""
        argv = self.command(*BASE_ARGS)
        model = spec.model or self.model
        if model:
            argv += ["--model", model]
        if spec.mcp_config is not None:
            argv += ["--mcp-config", str(spec.mcp_config)]
        argv += filter_args(self.args, ARGS)
        argv += filter_args(spec.extra_args, ARGS)
        if resume:
            argv += ["--resume", resume]
        return argv
