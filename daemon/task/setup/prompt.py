"""The prompt a task's agent starts with, as Multica's daemon writes it (Go `prompt.go`).

Multica's claim carries no prompt, only what the task is about (an issue, a comment, a chat
message, an autopilot run, a quick-create request); the daemon writes the opening message from
those, word for word as the Go daemon does, because the runtime brief and the `multica` CLI's
behaviour are written against that wording. A server that sends `prompt` (the embedded
reference server) gets it passed through unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from daemon.protocol.models import Task
from daemon.task.setup.quick_create_prompt import quick_create_prompt

_LOCAL_AGENT = "You are running as a local coding agent for a Multica workspace.\n\n"


_CONTINUITY_HEAD = (
    "## Session Continuity Notice\n\n"
    "This run was meant to continue an earlier conversation, but that provider session could"
    " not be restored, so you are on a fresh one. "
)
_ISSUE_CONTINUITY = _CONTINUITY_HEAD + (
    "The issue and its full comment history are unaffected — that record is the authoritative"
    " version of this conversation, and reading it (which your workflow already requires)"
    " reconstructs it. What is gone is only your own working memory from earlier turns: what"
    " you already tried, what you ruled out, and how far you had got. Re-derive what you need"
    " instead of assuming it, and do not claim continuity the record cannot back up. Do not"
    " open your reply by announcing this — raise it only where it actually matters, such as"
    " when the user refers to reasoning you never wrote down.\n\n"
)
_CHAT_CONTINUITY = _CONTINUITY_HEAD + (
    "The conversation itself is unaffected — Multica stored it, and you can read it back with"
    " `multica chat history` before acting; treat what you find there as the authoritative"
    " version. What is gone is only your own working memory from earlier turns: what you"
    " already tried, what you ruled out, and how far you had got. Re-derive what you need"
    " instead of assuming it. Do not open your reply by announcing this — raise it only where"
    " it actually matters.\n\n"
)


def build_prompt(task: Task, session_lost: bool = False) -> str:
    """The agent's opening message: the server's `prompt`, else the one Multica's daemon builds.

    `session_lost`: the claim named a session this run cannot resume; as Go's daemon, the
    prompt then ends with a notice so the agent does not assume a memory it no longer has.
    """
    body = task.prompt or _builder(task)(task)
    if not session_lost:
        return body
    notice = _CHAT_CONTINUITY if task.chat_session_id else _ISSUE_CONTINUITY
    return body + ("" if body.endswith("\n\n") else "\n") + notice


def task_kind(task: Task) -> str:
    """`chat`, `comment`, `autopilot`, `quick_create` or `issue`, checked in Multica's order."""
    if task.chat_session_id:
        return "chat"
    if task.trigger_comment_id:
        return "comment"
    if task.autopilot_run_id:
        return "autopilot"
    if task.quick_create_prompt:
        return "quick_create"
    return "issue"


def _builder(task: Task) -> Callable[[Task], str]:
    builders: dict[str, Callable[[Task], str]] = {
        "chat": chat_prompt,
        "comment": comment_prompt,
        "autopilot": autopilot_prompt,
        "quick_create": quick_create_prompt,
        "issue": issue_prompt,
    }
    return builders[task_kind(task)]


def issue_prompt(task: Task) -> str:
    """An issue assigned to the agent: read it with the CLI, then do it."""
    issue = task.issue_id
    text = _LOCAL_AGENT + f"Your assigned issue ID is: {issue}\n\n"
    if task.handoff_note:
        text += (
            "You were handed this issue with a handoff note. Treat it as the assigner's scoping"
            " instruction for this run; follow it before doing anything broader, and do not reply"
            " to it as if it were a comment:\n\n"
            f"> {task.handoff_note}\n\n"
        )
    text += (
        f"Start by running `multica issue get {issue} --output json` to understand your task,"
        " then complete it.\n"
        "For comment history, follow the rule in your runtime workflow file (assignment-triggered"
        " tasks treat the read as mandatory). Scan the threads first with `multica issue comment"
        f" list {issue} --roots-only --summary --compact --output json`, then expand only what"
        " matters with `--thread <thread-id> --tail 30`. For `--since` incremental polling,"
        " pagination, and folding, see `multica issue comment list --help`.\n"
    )
    return text


def _author(task: Task) -> str:
    if task.trigger_author_type == "system":
        return "The platform"
    if task.trigger_author_type == "agent":
        return f"Another agent ({task.trigger_author_name or 'another agent'})"
    return "A user"


def comment_prompt(task: Task) -> str:
    """A comment mentioned the agent: answer that comment, in its thread."""
    issue = task.issue_id
    text = _LOCAL_AGENT + f"Your assigned issue ID is: {issue}\n\n"
    if task.trigger_comment_content:
        text += (
            f"[NEW COMMENT] {_author(task)} just left a new comment. Focus on THIS comment — do"
            " not confuse it with previous ones:\n\n"
            f"> {task.trigger_comment_content}\n\n"
        )
    text += (
        f"Start by running `multica issue get {issue} --output json` to understand your task,"
        " then decide how to proceed.\n\n"
    )
    return text + _comments_hint(task) + _reply_instructions(task)


def _comments_hint(task: Task) -> str:
    issue = task.issue_id
    thread = task.trigger_thread_id or task.trigger_comment_id
    since = task.new_comments_since
    if task.new_comment_count > 0 and since and issue:
        return (
            f"{task.new_comment_count} new comment(s) on this issue since your last run — don't"
            " read them all blindly. Start with the thread your triggering comment is in:"
            f" `multica issue comment list {issue} --thread {thread} --since {since} --compact"
            " --output json` (swap `--since` for `--tail 30` if you need the full thread, not just"
            " the delta). Only if you need context from the other threads, rerun it without"
            " `--thread` for the issue-wide catch-up.\n\n"
        )
    if task.prior_session_id:
        return (
            "You're resuming the prior session, and the triggering comment is already included"
            " above. No other new comments on this issue since your last run. If your reply"
            " depends on thread context, do not rely only on resumed session memory — first pull"
            f" the triggering conversation with: `multica issue comment list {issue} --thread"
            f" {thread} --tail 30 --compact --output json`.\n\n"
        )
    return (
        f"Read the triggering conversation first: `multica issue comment list {issue} --thread"
        f" {thread} --tail 30 --compact --output json` (that thread's root + its 30 newest"
        " replies). Need cross-thread background? Rerun with `--roots-only --summary` replacing"
        " `--thread ... --tail 30` to scan the other threads cheaply, and expand only what looks"
        " relevant.\n\n"
    )


def _reply_instructions(task: Task) -> str:
    return (
        "Post your reply as a comment — always use the trigger comment ID below, do NOT reuse"
        " --parent values from previous turns in this session.\n\n"
        "Write the body file first (rules: ## Comment Formatting above — MUL-2904 / #4182):\n\n"
        f"    multica issue comment add {task.issue_id} --parent {task.trigger_comment_id}"
        " --content-file ./reply.md\n"
        "    rm ./reply.md\n\n"
        "Do NOT write literal `\\n` escapes to simulate line breaks; the file preserves real"
        " newlines.\n"
    )


def chat_prompt(task: Task) -> str:
    """A message in a direct web chat with the agent."""
    return (
        "You are running as a chat assistant for a Multica workspace.\n"
        "Audience: direct room.\n\n"
        f"User message:\n{task.chat_message}\n"
        "\nTo include a file or image you produced in your reply, run `multica attachment upload"
        " <local-path>`. The file binds to your reply automatically and appears as an attachment"
        " card below it even if you paste nothing. The command also returns a `markdown` snippet"
        " you may paste on its own line to place the item where you want it (files render as a"
        " card, images inline).\n"
    )


def autopilot_prompt(task: Task) -> str:
    """A run-only autopilot: no issue, only the autopilot's own instructions."""
    text = (
        _LOCAL_AGENT + "This task was triggered by an Autopilot in run-only mode. There is no"
        " assigned Multica issue for this run.\n\n"
        f"Autopilot run ID: {task.autopilot_run_id}\n"
    )
    if task.autopilot_id:
        text += f"Autopilot ID: {task.autopilot_id}\n"
    if task.autopilot_title:
        text += f"Autopilot title: {task.autopilot_title}\n"
    if task.autopilot_source:
        text += f"Trigger source: {task.autopilot_source}\n"
    payload = _payload_text(task.autopilot_trigger_payload)
    if payload:
        text += f"Trigger payload:\n{payload}\n"
    text += "\nAutopilot instructions:\n"
    if task.autopilot_description.strip():
        text += task.autopilot_description + "\n\n"
    elif task.autopilot_title:
        text += f"{task.autopilot_title}\n\n"
    else:
        text += (
            "No additional autopilot instructions were provided. Inspect the autopilot"
            " configuration before proceeding.\n\n"
        )
    if task.autopilot_id:
        return text + (
            f"Start by running `multica autopilot get {task.autopilot_id} --output json` if you"
            " need the full autopilot configuration, then complete the instructions above.\n"
        )
    return text + "Complete the instructions above.\n"


def _payload_text(payload: object) -> str:
    # The Go daemon prints the payload's raw JSON; the decoded value is printed back as JSON.
    return "" if payload is None else json.dumps(payload, ensure_ascii=False)
