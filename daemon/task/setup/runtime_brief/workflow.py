"""How each kind of task is worked: the issue workflow with its status rules, a chat, a
quick-create and a run-only autopilot."""

from __future__ import annotations

import json

from daemon.protocol.models import Task
from daemon.task.setup.runtime_brief.statuses import CATEGORY_RULE

# One text for every run on an issue, whatever triggered it: the per-turn prompt says what
# did, so a resumed session reads the same brief each time.
_ISSUE_STEPS = (
    "## Workflow\n\n"
    "Every run on an issue follows the same steps. The prompt of this turn says what started"
    " it (an assignment, or a comment with its id and the `--parent` to reply with) and"
    " gives the issue's id.\n\n"
    "1. Read the issue with `multica issue get`; its JSON already holds the `metadata` bag,"
    ' so no separate read is needed (see "Issue metadata").\n'
    "2. Always catch up on the comments, even when the trigger looks complete, in two"
    " bounded reads rather than one bulk read: first every thread cheaply (`--roots-only"
    " --summary --compact`), then only the threads that matter (`--thread <id> --tail 30"
    " --compact`). Acting on stale or partial instructions most often comes from skipping"
    " this. When a comment started the run, its thread is the first to expand.\n"
    "3. If anything this turn produces is what the issue itself asks for, set it to"
    " `in_progress` first, unless it already is or your identity forbids status changes: the"
    " board should show the work while it happens. The kind of work (research, design,"
    " planning, review) does not matter, only whether it is part of this issue's ask. Then"
    ' do the task within what your identity allows (see "Which instructions win"). A'
    " delegation-only role delegates and stops once that is done. Before assigning yourself"
    " anything, look in the target issue's comments for someone already on it and for an"
    " `## Active sibling runs` block; an assignment or status that only records work already"
    " under way takes `--no-start`.\n"
)

_POST = (
    "4. Post your result as one comment with `multica issue comment add`, from a file (see"
    ' "Comment Formatting"). When the prompt names a triggering comment, reply in its thread'
    " with the `--parent` it gives for this turn (never one from an earlier turn), one reply"
    " per thread when it lists several; otherwise post a new top-level comment. This step"
    " is not optional: the comment is the only thing the user sees.\n"
)

_POST_AS_LEADER = (
    "4. Post your result as one comment with `multica issue comment add`, from a file (see"
    ' "Comment Formatting"), replying in the thread and with the `--parent` this turn\'s'
    " prompt gives, or as a new top-level comment when there is none. The one exception:"
    " when you decide no action is needed, record it with `multica squad activity"
    ' <issue-id> no_action --reason "..."` and end without any comment at all.\n'
)

_ISSUE_CLOSE = (
    "5. Before ending, check that the status still says where things stand; set or delete a"
    ' metadata key only if it clears the bar in "Issue metadata". When in doubt, write'
    " none.\n\n"
    "### Status\n\n"
    "The status tells where the issue stands, not where your run is. Change it the moment"
    " your work changes that, mid-turn too, and only when the new value differs, whoever"
    " the assignee is. Skip any status change your identity forbids.\n\n"
    "- You delivered what the issue asks for and it awaits acceptance: `in_review`. An"
    " issue assigned to you, including a sub-issue in a chain or a stage, always ends here"
    " when delivered; stages and parents wait for that signal. Only people set `done`.\n"
    "- The issue's work goes on after this turn (you created sub-issues, or delivered one"
    " part of several): `in_progress`.\n"
    "- You cannot go on without something you lack: `blocked`, with a comment that says"
    " what is missing.\n"
)

_LEADER_STATUS = (
    "- As a squad leader, handing work to members is not delivery: the parent stays"
    " `in_progress` and moves to `in_review` only on a later turn (a member's update or a"
    " stage finishing) where you confirm the whole goal is met.\n"
)

_NO_DELIVERABLE = (
    "- Your turn produced none of the issue's own deliverable (you answered a question, or"
    " advised on work owned elsewhere): change nothing, at any point. Questions, discussion"
    " and thanks never touch the status; that is what keeps runs in parallel from flipping"
    " the board back and forth.\n\n"
)


def issue_workflow(leader: bool, *, custom_statuses: bool = False) -> str:
    """The steps of an issue run and the rules for its status."""
    text = _ISSUE_STEPS + (_POST_AS_LEADER if leader else _POST) + _ISSUE_CLOSE
    text += _LEADER_STATUS if leader else ""
    return text + (CATEGORY_RULE if custom_statuses else "") + _NO_DELIVERABLE


CHAT = (
    "## Workflow\n\n"
    "This is a chat: answer the user's message directly and briefly, as a conversation.\n\n"
    "- The whole `multica` CLI is yours for looking things up: `multica issue list --output"
    " json` or `multica issue get <id> --output json` for issues, `multica workspace get"
    " --output json` for the workspace, and its members and agents.\n"
    "- When asked to act (create an issue, change a status), use the matching command.\n"
    "- When the work needs code, fetch it first with `multica repo checkout <url>`, with"
    " `--ref <branch-or-sha>` for an exact revision.\n\n"
)

QUICK_CREATE = (
    "## Workflow\n\n"
    "Quick-create started this task: there is no Multica issue yet. Follow the field and"
    " output rules of the prompt; the issue workflow does not apply. Even without a"
    " prompt:\n\n"
    "- Run `multica issue create` exactly once, then stop.\n"
    "- Do not run `multica issue get`, `multica issue status` or `multica issue comment"
    " add`: there is no issue to read, move or comment on. The platform tells the user"
    " whether the issue was created.\n"
    "- When the CLI fails, end with its error as your only output, without retrying.\n\n"
)

AUTOPILOT_GUARD = (
    "Do not run `multica issue get`, `multica issue comment add` or `multica issue status`"
    " unless the autopilot's instructions tell you to create or update an issue."
)


def autopilot_workflow(task: Task) -> str:
    """A run-only autopilot: which one, what set it off, and its instructions."""
    text = (
        "## Workflow\n\n"
        "An autopilot started this run in run-only mode: no issue is assigned to it.\n\n"
        f"- Autopilot run: `{task.autopilot_run_id}`\n"
    )
    if task.autopilot_id:
        text += f"- Autopilot: `{task.autopilot_id}`\n"
    if task.autopilot_title:
        text += f"- Title: {task.autopilot_title}\n"
    if task.autopilot_source:
        text += f"- Triggered by: {task.autopilot_source}\n"
    if task.autopilot_trigger_payload not in (None, "", {}):
        raw = task.autopilot_trigger_payload
        payload = raw if isinstance(raw, str) else json.dumps(raw, indent=2, sort_keys=True)
        text += f"- Trigger payload:\n\n```json\n{payload}\n```\n"
    if task.autopilot_description.strip():
        text += f"\nThe autopilot's instructions:\n\n{task.autopilot_description.strip()}\n\n"
    if task.autopilot_id:
        text += (
            f"- `multica autopilot get {task.autopilot_id} --output json` shows the whole"
            " autopilot when you need it.\n"
        )
    return text + f"- Carry out the instructions directly.\n- {AUTOPILOT_GUARD}.\n\n"
