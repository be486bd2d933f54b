"""The runtime brief: standing instructions written where the agent CLI reads them on start.

Multica's daemon writes one into the work directory before each run (`CLAUDE.md` for Claude
Code, `AGENTS.md` for Codex and the others; here also `GEMINI.md` for Gemini CLI). Each
module holds one part of it; this one decides which parts a kind of task gets, in Multica's
order (`kind.py` names the kinds):

    part                      issue   chat   quick-create   autopilot
    commands                  full    full   one command    full
    comment bodies             yes     -         -             -
    repositories               yes    yes        -            yes
    issue metadata             yes     -         -             -
    which instructions win     yes     -         -             -
    sub-issues, mentions,
      attachments              yes     -         -             -

The header, the turn rules, identity, the requesting user, workspace context, project, issue
bodies, skills, the CLI rule and the output are in every brief.
"""

from __future__ import annotations

from pathlib import Path

from daemon.boundary.beneath import Owner, write_under
from daemon.protocol.models import Task
from daemon.task.setup.runtime_brief import commands, context, issue_rules, standing, workflow
from daemon.task.setup.runtime_brief.kind import BriefKind, brief_kind, leads_a_squad
from daemon.task.setup.runtime_brief.output import output

# Gemini CLI loads GEMINI.md, not AGENTS.md, unless its user configured otherwise.
# Qwen Code reads both QWEN.md and AGENTS.md; Multica writes QWEN.md, its own.
# CodeBuddy Code, a fork of Claude Code, loads CODEBUDDY.md, its own memory file.
_FILE_BY_BACKEND = {
    "claude": "CLAUDE.md",
    "codebuddy": "CODEBUDDY.md",
    "gemini": "GEMINI.md",
    "qwen": "QWEN.md",
}
DEFAULT_FILE = "AGENTS.md"
# CLIs that load no brief file (Trae reads `.trae/rules/`, OpenClaw its own workspace): as in
# Multica, they also get the brief in the prompt. Adding one that does read its file only
# sends the brief twice.
_IN_PROMPT = frozenset({"kimi", "openclaw", "traecli", "qwenpaw"})

__all__ = ["DEFAULT_FILE", "BriefKind", "brief_file", "brief_kind", "runtime_brief", "write_brief"]


def brief_file(backend: str) -> str:
    """The file name the backend's CLI reads standing instructions from."""
    return _FILE_BY_BACKEND.get(backend, DEFAULT_FILE)


def runtime_brief(task: Task) -> str:
    """The brief for this task: who and where it is, its commands, its workflow, its output."""
    kind = brief_kind(task)
    leader = kind is BriefKind.ISSUE and leads_a_squad(task)
    on_issue = kind is BriefKind.ISSUE
    parts = [
        standing.HEADER,
        standing.TURN_IS_THE_TASK,
        context.identity(task),
        context.requesting_user(task),
        context.workspace_context(task),
        commands.QUICK_CREATE if kind is BriefKind.QUICK_CREATE else commands.full(task),
        commands.SQUAD if leader else "",
        standing.ISSUE_BODY,
        commands.COMMENT_BODIES if on_issue else "",
        "" if kind is BriefKind.QUICK_CREATE else context.repositories(task),
        context.project(task),
        issue_rules.METADATA if on_issue else "",
        issue_rules.PRECEDENCE if on_issue else "",
        _workflow(kind, task, leader),
        issue_rules.SUB_ISSUES if on_issue else "",
        context.skills(task),
        issue_rules.MENTIONS if on_issue else "",
        issue_rules.ATTACHMENTS if on_issue else "",
        standing.ONLY_THE_CLI,
        output(kind, leader, task.chat_channel_type),
    ]
    return "".join(parts)


def _workflow(kind: BriefKind, task: Task, leader: bool) -> str:
    if kind is BriefKind.CHAT:
        return workflow.CHAT
    if kind is BriefKind.QUICK_CREATE:
        return workflow.QUICK_CREATE
    if kind is BriefKind.AUTOPILOT:
        return workflow.autopilot_workflow(task)
    return workflow.issue_workflow(leader, custom_statuses=bool(task.issue_statuses))


def brief_in_prompt(backend: str, task: Task) -> str:
    """The brief for the backend's prompt: "" for every CLI that reads it from its file."""
    return runtime_brief(task) if backend in _IN_PROMPT else ""


def write_brief(workdir: Path, backend: str, task: Task, owner: Owner | None = None) -> Path:
    """Write the brief into `workdir` under the backend's file name; return its path.

    Replaced, never written through: a symlink an earlier run left under that name is
    swapped for the file, and its target is untouched.
    """
    return write_under(workdir, brief_file(backend), runtime_brief(task), owner=owner)
