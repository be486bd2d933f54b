"""The prompt a task's agent starts with, as Multica's daemon writes it (Go `prompt.go`).

Multica's claim carries no prompt, only what the task is about (an issue, a comment, a chat
message, an autopilot run, a quick-create request); the daemon writes the opening message from
those, word for word as the Go daemon does, because the runtime brief and the `multica` CLI's
behaviour are written against that wording (a comment's in comment_prompt.py, a chat's in
chat_prompt.py, a quick-create's in quick_create_prompt.py). A server that sends `prompt` (the
embedded reference server) gets it passed through unchanged. Either way the blocks true of
this run only follow (turn_blocks.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from daemon.protocol.models import Task
from daemon.task.setup.chat_prompt import chat_prompt
from daemon.task.setup.comment_prompt import LOCAL_AGENT, comment_prompt
from daemon.task.setup.quick_create_prompt import quick_create_prompt
from daemon.task.setup.turn_blocks import turn_blocks


def build_prompt(task: Task, session_lost: bool = False, shared_folder: bool = False) -> str:
    """The agent's opening message: the server's `prompt`, else the one Multica's daemon
    builds, then the blocks true of this run only (turn_blocks.py).

    `session_lost`: the claim named a session this run cannot resume; as Go's daemon, the
    prompt then carries a notice so the agent does not assume a memory it no longer has.
    `shared_folder`: the turn works in a user's folder another task may be editing.
    """
    body = task.prompt or _builder(task)(task)
    blocks = turn_blocks(task, session_lost, shared_folder)
    if not blocks:
        return body
    return body + ("" if body.endswith("\n\n") else "\n") + blocks


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
    text = LOCAL_AGENT + f"Your assigned issue ID is: {issue}\n\n"
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


def autopilot_prompt(task: Task) -> str:
    """A run-only autopilot: no issue, only the autopilot's own instructions."""
    text = (
        LOCAL_AGENT + "This task was triggered by an Autopilot in run-only mode. There is no"
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
