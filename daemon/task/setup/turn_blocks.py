"""What is true of one run only, appended to its prompt as Multica's daemon appends it.

The agent's other issue tasks in flight, a folder shared with a task that holds it, a session
this run could not continue, who triggered the run and the apps it is connected to differ from
one run to the next on the same issue. Claude Code loads the runtime brief ahead of the whole
conversation, so anything in the brief that changes per run throws away the cached history on
every resume; after the turn's own message it costs only that turn. The blocks come in Go's
order, each ending in a blank line.
"""

from __future__ import annotations

import re

from daemon.protocol.models import Task
from daemon.task.setup.chat_prompt import SLACK, stores_transcript
from daemon.task.setup.runtime_brief.markdown import inline

_CONTINUITY_HEAD = (
    "## Session Continuity Notice\n\n"
    "This run was meant to continue an earlier conversation, but that provider session could"
    " not be restored, so you are on a fresh one. "
)
_WORKING_MEMORY = (
    " What is gone is only your own working memory from earlier turns: what you already tried,"
    " what you ruled out, and how far you had got. Re-derive what you need instead of assuming"
    " it"
)
ISSUE_CONTINUITY = _CONTINUITY_HEAD + (
    "The issue and its full comment history are unaffected — that record is the authoritative"
    " version of this conversation, and reading it (which your workflow already requires)"
    " reconstructs it." + _WORKING_MEMORY + ", and do not claim continuity the record cannot"
    " back up. Do not open your reply by announcing this — raise it only where it actually"
    " matters, such as when the user refers to reasoning you never wrote down.\n\n"
)
CHANNEL_CONTINUITY = _CONTINUITY_HEAD + (
    "The channel conversation itself is unaffected — read it back with `multica chat history`"
    " / `multica chat thread` before acting, and treat what you find there as the authoritative"
    " version." + _WORKING_MEMORY + ". Do not open your reply by announcing this — raise it"
    " only where it actually matters.\n\n"
)
TRANSCRIPT_CONTINUITY = _CONTINUITY_HEAD + (
    "The conversation itself is unaffected — Multica stored it, and you can read it back with"
    " `multica chat history` before acting; treat what you find there as the authoritative"
    " version." + _WORKING_MEMORY + ". Do not open your reply by announcing this — raise it"
    " only where it actually matters.\n\n"
)
LOST_CONTINUITY = (
    "## Session Continuity Notice\n\n"
    "This run was meant to continue an earlier conversation, but that session's context could"
    " NOT be restored — you are starting fresh with no memory of the previous turns. That"
    " history is not readable from anywhere now: there is no command that fetches it, and only"
    " the context already in this message survives. **When you reply, tell the user up front"
    " (one short sentence) that the previous conversation context was unavailable and this is"
    " a new session**, so they understand why the thread did not carry over.\n\n"
)


SHARED_FOLDER = (
    "## Shared working directory\n\n"
    "Your working directory is the user's own checkout, and another task on this machine may be"
    " editing it while you run. This turn deliberately neither holds nor waits for the"
    " directory lock — that is what keeps a conversation from queueing behind a long build.\n\n"
    "Read freely. Treat writing the way the user treats saving a file in their own editor:"
    " reasonable for a small change they just asked for, wrong for a broad refactor, a"
    " dependency install, or a build that rewrites many files. Work that size belongs in an"
    " issue task, which is serialised against the other writers. If you do write, say so in"
    " your reply — a sibling task may be looking at the same file.\n\n"
)
_CODE_TOKEN = re.compile(r"^[A-Za-z0-9_.-]+$")


def turn_blocks(task: Task, session_lost: bool = False, shared_folder: bool = False) -> str:
    """The per-run blocks of this task ("" when none applies); `session_lost`: a session the
    claim named could not be continued (the daemon's finding, or the server's own flag);
    `shared_folder`: this turn works in a user's folder without holding it (a chat turn)."""
    text = _sibling_runs(task)
    if shared_folder:
        text += SHARED_FOLDER
    if session_lost or task.prior_session_resume_unavailable:
        text += continuity_notice(task)
    return text + _initiator(task) + _connected_apps(task)


def _connected_apps(task: Task) -> str:
    """The apps whose MCP servers this run has, each named once with its server; an entry
    whose names are not plain tokens is left out (they are shown as code)."""
    lines = ""
    for app in task.connected_apps:
        server, slug = app.server_name.strip(), app.toolkit_slug.strip()
        if not _CODE_TOKEN.match(server) or not _CODE_TOKEN.match(slug):
            continue
        name = inline(app.toolkit_name) or inline(_display_name(slug)) or slug
        lines += f"- {name} (`{slug}`) via MCP server `{server}`\n"
    if not lines:
        return ""
    return (
        "## Connected Apps\n\n" + lines + "\nUse the listed MCP server when the task asks to"
        " read or act in one of these apps.\n\n"
    )


def _display_name(slug: str) -> str:
    """A toolkit's name from its slug, as Multica guesses it without asking its catalog."""
    known = {"github": "GitHub", "gmail": "Gmail", "linkedin": "LinkedIn"}
    if slug in known:
        return known[slug]
    words = [w for w in re.split(r"[_-]", slug) if w]
    return " ".join(w[:1].upper() + w[1:].lower() for w in words) or slug


def continuity_notice(task: Task) -> str:
    """The notice for a session that could not be continued: it says where this surface's
    conversation can still be read, since that is what survives."""
    if not task.chat_session_id:
        return ISSUE_CONTINUITY
    if task.chat_channel_type == SLACK:
        return CHANNEL_CONTINUITY
    if stores_transcript(task.chat_channel_type):
        return TRANSCRIPT_CONTINUITY
    return LOST_CONTINUITY


def _sibling_runs(task: Task) -> str:
    """The agent's other issue tasks in flight: only an issue task can act on it."""
    issue, runs = task.issue_id, task.active_sibling_runs
    if not issue or not runs:
        return ""
    text = (
        "## Active sibling runs\n\n"
        "This agent has other in-flight issue tasks. Before starting overlapping code or PR"
        " work, check this issue's comment history for a claim or handoff (`multica issue"
        f" comment list {issue} --roots-only --summary --compact --output json`) and inspect"
        " relevant siblings with the `run-messages` commands below — coordinate with existing"
        " work instead of opening a second PR. For writes that only record ownership or status"
        " of work already underway, use `--no-start` on `multica issue assign`/`update`/"
        "`status`.\n\n"
    )
    for run in runs:
        text += f"- {run.issue_identifier or run.issue_id} — task `{run.task_id}`, status"
        text += f" `{run.status}`"
        if run.started_at:
            text += f", started {run.started_at}"
        elif run.created_at:
            text += f", created {run.created_at}"
        title = run.issue_title.replace("\r", " ").replace("\n", " ").strip()
        if title:
            text += f": {title}"
        text += f"; inspect: `multica issue run-messages {run.task_id}`\n"
    return text + "\n"


def _initiator(task: Task) -> str:
    """Who the agent answers in this run; their name made inert, their address only when it
    could be one (never escaped: an agent may match it exactly)."""
    name = inline(task.initiator_name)
    if not name:
        return ""
    if task.initiator_type == "agent":
        who = f"**{name}**, another agent in this workspace"
    elif email := _email(task.initiator_email):
        who = f"**{name}** ({email}), a member of this workspace"
    else:
        who = f"**{name}**, a member of this workspace"
    return (
        f"## Task Initiator\n\nThis task was initiated by {who}.\n\n"
        "The initiator — not the runtime owner — is who you are answering: apply any per-person"
        " privacy or access rules your instructions define. Your Multica credentials stay scoped"
        " to the runtime owner, and initiator attribution does not change what you may read or"
        " write; do not assume the initiator can see everything you can.\n\n"
    )


def _email(text: str) -> str:
    text = text.strip()
    if "@" not in text:
        return ""
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c in " \\`*<>[]" for c in text):
        return ""
    return text
