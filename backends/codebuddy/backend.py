"""The CodeBuddy Code backend: `codebuddy -p`, a fork of Claude Code that kept its protocol.

    codebuddy -p --output-format stream-json --input-format stream-json --verbose
              --permission-mode bypassPermissions
              --disallowedTools AskUserQuestion EnterPlanMode ExitPlanMode
              [--mcp-config FILE] [--model M] [--resume SESSION]
              [configured args] [task args]

Multica's daemon drives it exactly as it drives Claude Code — the prompt as one stream-json
user message, `control_request` lines answered with an allow, stdin closed after the `result`
line — so this backend is Claude Code's with another command line, another name on the
usage and its own model catalog (`backends.codebuddy.models`). Besides the question tool, the
plan-mode tools are kept away too: headless, entering plan mode would end the turn with a plan
and no work. The runtime brief is the `CODEBUDDY.md` it loads from the work directory (its
own memory file, not `CLAUDE.md`). A task's MCP servers are added to the user's own, as
Multica adds them: CodeBuddy's `--strict-mcp-config` would drop its user, project and local
scopes.

No registry serves the CLI here (npm answers 404 for `@tencent-ai/codebuddy-code`), so its
tests run the parser on output of Claude Code's documented format.
"""

from __future__ import annotations

from backends.claude.backend import BASE_ARGS as CLAUDE_BASE_ARGS
from backends.claude.backend import ClaudeBackend
from backends.claude.stream import ClaudeStreamParser
from backends.codebuddy.models import codebuddy_models
from backends.models import Catalog

# Claude Code's flags, and two more tools a headless run has no one to answer: plan mode
# waits for a person to approve the plan.
BASE_ARGS = (*CLAUDE_BASE_ARGS, "EnterPlanMode", "ExitPlanMode")

# Set by a running CodeBuddy Code for its tool processes (its Claude Code lineage shows).
SESSION_MARKERS = frozenset({"CODEBUDDY", "CODEBUDDY_CODE_ENTRYPOINT", "CODEBUDDY_SESSION_ID"})


class CodebuddyStreamParser(ClaudeStreamParser):
    """Claude Code's stream-json parser, naming CodeBuddy in errors and on the usage."""

    cli = "codebuddy"
    label = "CodeBuddy Code"
    provider = "codebuddy"


class CodebuddyBackend(ClaudeBackend):
    """Runs CodeBuddy Code for a task; resumes sessions and falls back when one is gone."""

    name = "codebuddy"
    base_args = BASE_ARGS
    parser_type = CodebuddyStreamParser
    strict_mcp = False
    min_version = ""
    tested_max = ""
    session_markers = SESSION_MARKERS

    async def models(self) -> Catalog:
        """CodeBuddy's own catalog over ACP (`backends.codebuddy.models`), not Claude Code's."""
        return await codebuddy_models(self)
