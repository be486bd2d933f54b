"""The runtime brief: standing instructions written where the agent CLI reads them on start.

Multica's daemon writes one into the work directory before each run (`CLAUDE.md` for Claude
Code, `QWEN.md` for Qwen Code, `AGENTS.md` for Codex and the others; here also `GEMINI.md`
for Gemini CLI): who the
agent is, its own instructions, the workspace's context, the `multica` commands it works
through and how this kind of task is done. The per-run prompt stays short and points here.
"""

from __future__ import annotations

from pathlib import Path

from daemon.protocol.models import Task
from daemon.task.setup.nofollow import Owner, write_under
from daemon.task.setup.prompt import task_kind

# Gemini CLI loads GEMINI.md, not AGENTS.md, unless its user configured otherwise. Qwen Code
# reads both QWEN.md and AGENTS.md; Multica writes QWEN.md, its own.
_FILE_BY_BACKEND = {"claude": "CLAUDE.md", "gemini": "GEMINI.md", "qwen": "QWEN.md"}
DEFAULT_FILE = "AGENTS.md"

_HEADER = (
    "# Multica Agent Runtime\n\n"
    "You are a coding agent working for a Multica workspace. Everything you read from or"
    " write to the platform goes through the `multica` CLI, which is already logged in as"
    " this task.\n\n"
)

_FINISH_IN_THE_TURN = (
    "## Finish inside this turn\n\n"
    "The task ends the moment your turn ends. Work left running in the background is lost,"
    " and nothing wakes you when it finishes, so run what you need in the foreground and"
    " report what you have. Do not wait on CI or other outside systems unless the task asks"
    " for their result.\n\n"
)

_ISSUE_COMMANDS = (
    "## Commands\n\n"
    "Add `--output json` for structured output; `multica <command> --help` lists the rest.\n\n"
    "- `multica issue get <id>`: the issue.\n"
    "- `multica issue comment list <issue-id>`: its discussion (`--roots-only --summary` to"
    " scan, `--thread <id> --tail 30` to read one thread).\n"
    "- `multica issue comment add <issue-id> --content-file <file> [--parent <comment-id>]`:"
    " reply. Write the body to a file in your working directory first.\n"
    "- `multica issue update <id>` / `multica issue status <id> <status>`: change it.\n"
    "- `multica issue create --title ... --description-file <file>`: file a new issue.\n\n"
)

_QUICK_CREATE_COMMANDS = (
    "## Commands\n\n"
    "- `multica issue create --title ... [--description-file <file>] --output json`: the one"
    " command this task runs.\n"
    "- `multica workspace member list`, `multica agent list`, `multica squad list`"
    " (`--output json`): to resolve a named assignee.\n\n"
)

_WORKFLOWS = {
    "issue": (
        "## How to work\n\n"
        "Read the issue and its comments, do the work, then post one comment that says what"
        " you did and where the result is. When blocked, say so in a comment instead of"
        " guessing.\n\n"
    ),
    "comment": (
        "## How to work\n\n"
        "A comment asked for you. Answer that comment in its thread (the prompt gives the"
        " `--parent` to use); read the issue and the thread for context first.\n\n"
    ),
    "chat": (
        "## How to work\n\n"
        "This is a conversation. Answer the user's message directly; your final message is the"
        " reply they see.\n\n"
    ),
    "autopilot": (
        "## How to work\n\n"
        "An autopilot started this run and there is no issue. Follow the autopilot's"
        " instructions from the prompt; do not create or comment on issues unless they ask.\n\n"
    ),
    "quick_create": (
        "## How to work\n\n"
        "Turn the user's input into exactly one new issue, following the prompt's field rules,"
        " then print the one line it asks for.\n\n"
    ),
}

_ALWAYS_CLI = (
    "## Use the `multica` CLI\n\n"
    "Do not call the Multica API with curl or guess URLs; the CLI carries this task's"
    " credentials and the right server.\n"
)


def brief_file(backend: str) -> str:
    """The file name the backend's CLI reads standing instructions from."""
    return _FILE_BY_BACKEND.get(backend, DEFAULT_FILE)


def runtime_brief(task: Task) -> str:
    """The brief for this task: identity, workspace context, commands and workflow by kind."""
    kind = task_kind(task)
    parts = [_HEADER, _FINISH_IN_THE_TURN, _identity(task)]
    if task.workspace_context.strip():
        parts.append(f"## Workspace context\n\n{task.workspace_context.strip()}\n\n")
    parts.append(_QUICK_CREATE_COMMANDS if kind == "quick_create" else _ISSUE_COMMANDS)
    if task.project_id:
        parts.append(f"## Project\n\n{task.project_title or task.project_id}\n\n")
    parts.append(_repositories(task))
    parts.extend((_WORKFLOWS[kind], _ALWAYS_CLI))
    return "".join(parts)


def _repositories(task: Task) -> str:
    """The repositories the agent may check out, and how (Multica's `multica repo checkout`)."""
    listed = [r for r in task.repos if r.url.strip()]
    if not listed:
        return ""
    text = (
        "## Repositories\n\n"
        "Get the code with `multica repo checkout <url> [--ref <branch-or-sha>]`: it makes a"
        " checkout on a branch of this task's own inside your working directory and prints"
        " its path.\n\n"
    )
    for repo in listed:
        about = f" — {repo.description}" if repo.description else ""
        text += f"- {repo.url}{about}\n"
    return text + "\n"


def _identity(task: Task) -> str:
    agent = task.agent
    agent_id = task.agent_id or agent.id
    if not (agent.name or agent_id or agent.instructions):
        return ""
    text = "## Agent identity\n\n"
    if agent.name:
        text += f"**You are: {agent.name}**" + (f" (ID: `{agent_id}`)" if agent_id else "")
        text += "\n\n"
    if agent.instructions:
        text += agent.instructions + "\n\n"
    return text


def write_brief(workdir: Path, backend: str, task: Task, owner: Owner | None = None) -> Path:
    """Write the brief into `workdir` under the backend's file name; return its path.

    Replaced, never written through: a symlink an earlier run left under that name is
    swapped for the file, and its target is untouched.
    """
    return write_under(workdir, brief_file(backend), runtime_brief(task), owner=owner)
