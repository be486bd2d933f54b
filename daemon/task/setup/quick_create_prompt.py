"""The opening message of a quick-create task, as Multica's daemon writes it (Go `prompt.go`).

The user typed one sentence into Multica's create-issue box; the agent turns it into exactly
one `multica issue create`. Kept apart from the other prompts because its rules are long.
"""

from __future__ import annotations

import json

from daemon.protocol.models import Task


def _q(value: str) -> str:
    # Go's %q: the value double-quoted with escapes, which JSON quoting matches for text.
    return json.dumps(value, ensure_ascii=False)


_INTRO = (
    "You are running as a quick-create assistant for a Multica workspace.\n\n"
    "A user captured the following input via the quick-create modal. There is NO "
    "existing issue. Your job is to create a well-formed issue from this input with a "
    "single `multica issue create` command.\n\n"
)

_FIELD_RULES = (
    "Field rules:\n\n"
    "- **title**: required. A concise but semantically rich summary. If the input "
    "references external resources (PRs, issues, URLs), use your judgment on whether "
    'fetching the resource would produce a meaningfully better title — e.g. "review PR '
    '#123" → "Review PR #123: Refactor auth module to OAuth2". Strip filler words but '
    "preserve key semantic information.\n\n"
    "- **description**: The description is the executing agent's primary context. Aim "
    "for high fidelity — they should grasp the user's intent as if they had read the raw "
    "input themselves. Use a two-section structure:\n\n"
    "  1. **User request** — Faithfully restate what the user wants in their own words. "
    "Preserve specific names, identifiers, file paths, code snippets, and technical "
    "terms verbatim. Strip non-spec material before writing it (this is removal, not "
    "paraphrasing): verbal routing wrappers about creating the issue or routing it (e.g. "
    '"create an issue", "分配给 X", "让 @X 处理") and pure conversational fillers (e.g. '
    '"对吧？"). When in doubt, keep it.\n\n'
    "     CC exception: `multica issue create` has no `--subscriber` flag, and the "
    "platform auto-subscribes members whose `[@Name](mention://member/<uuid>)` link "
    'appears in the description. When the user wrote "cc @Y", strip the verbal "cc" '
    "wrapper from the User request body and append a final `CC: <mention link(s)>` line "
    "to the description so the cc routing still fires.\n\n"
    "  2. **Context** — include ONLY when the input cited external resources AND you "
    "successfully fetched them AND they produced verifiable facts worth recording. "
    'Summarize facts only (e.g. "PR #45 changes auth to JWT"), not interpretation or '
    "unsolicited reference implementations. If you have nothing factual to add, omit the "
    "section entirely — never use it as an apology log for resources you could not "
    "fetch.\n\n"
    "  Hard rules: never invent requirements, implementation details, or acceptance "
    "criteria the user did not express; never reduce multi-sentence input to a single "
    "vague sentence; never echo the title.\n\n"
    "  Passing the description: a short, single-line body with no code, quotes, "
    "backticks, `$()`, or other special characters may go inline via `--description "
    '"..."`. Anything multi-line, or containing code snippets / file paths / quotes / '
    "backticks / `$()` / special characters, or otherwise long — which quick-create "
    "descriptions usually are — MUST be written to `./description.md` and passed with "
    "`--description-file ./description.md`; passing rich text inline lets the shell "
    "rewrite or truncate it (MUL-2904). That file MUST live inside your current working "
    "directory (e.g. `./description.md`) — never `/tmp` or any machine-shared path, "
    "where a different run may have left a stale file that would silently become this "
    "issue's description. If the file write fails for any reason, stop and fix it; never "
    "run `--description-file` against a file whose write did not succeed.\n\n"
)

_ANY_PRIORITY = (
    "- **priority**: one of `urgent`, `high`, `medium`, `low`, or omit. Map P0/P1 → "
    'urgent/high; "asap" → urgent. If unspecified, omit.\n\n'
)

_ASSIGNEE = (
    "- **assignee**:\n"
    '    - When the user names someone ("assign to X" / "@X"), call `multica workspace '
    "member list --output json`, `multica agent list --output json`, and `multica squad "
    "list --output json` and find the matching entity by display name. Squads are "
    'first-class assignees too — a squad name (e.g. "Super Human") routes work to the '
    "squad leader, who then delegates. On a clean unambiguous match, prefer "
    "`--assignee-id <uuid>` using the `user_id` (member) or `id` (agent or squad) from "
    "that JSON — UUID matching is exact and robust to name collisions in workspaces with "
    "overlapping names. `--assignee <name>` (fuzzy) is acceptable as a fallback when "
    "names are unambiguous. On no match or ambiguous match, do NOT pass either flag — "
    "instead append a final line to the description: `Unrecognized assignee: X`.\n"
    "    - Treat bare @-routing as an assignee directive even when the user did not "
    'write the English word "assign". This includes Chinese imperatives like `让 @独立团 '
    "review 这个 PR`, `给 @X 处理`, or `交给 @X`; strip the leading `@`/`＠` before matching "
    "display names. Do not keep that routing wrapper or `@Name` in the description "
    "unless it is a true CC-style notification rather than ownership. If the matched "
    "entity is a squad, pass the squad's `id` as `--assignee-id`, not the leader agent's "
    "id.\n"
)

_DEFAULT_SELF = (
    "    - When the user did NOT name an assignee, default to YOURSELF (the picker "
    "agent): pass `--assignee-id <your agent UUID>` (preferred) or `--assignee <your "
    "agent name>`. Never leave the issue unassigned.\n\n"
)

_CLOSING = (
    "- **status**: omit (defaults to `todo`).\n"
    "- **attachments**: `--attachment` takes LOCAL file paths, never URLs. Image URLs in "
    "the user input are already markdown — keep them inline. Files you produced: see `## "
    "Output`.\n\n"
    "Output format:\n"
    "- Run exactly one `multica issue create --output json` invocation. Do not retry for "
    "any reason — even on non-zero exit. The issue may already exist; another attempt "
    "would create a duplicate.\n"
    "- Parse the JSON response to read the created issue's `identifier` (preferred) or "
    "`id` (fallback). Do not scrape human output and do not assume any workspace issue "
    "prefix such as `MUL-`; workspaces can use custom prefixes.\n"
    "- After success, print exactly one line: `Created <identifier-or-id>: <title>` and "
    "exit. No commentary, no follow-up tool calls.\n"
    "- Do NOT call `multica issue get` or `multica issue comment add` — there is no "
    "issue to query or comment on.\n"
    "- On CLI error or JSON parse error, exit with the error as the only output. The "
    "platform writes a failure notification automatically.\n"
)


def quick_create_prompt(task: Task) -> str:
    """Create one well-formed issue from the user's quick-create input, then stop."""
    text = _INTRO + f"User input:\n> {task.quick_create_prompt}\n\n" + _FIELD_RULES
    priority = task.quick_create_priority
    if priority:
        text += (
            f"- **priority**: required for this run. Pass `--priority {priority}`; the "
            "quick-create selection is authoritative.\n\n"
        )
    else:
        text += _ANY_PRIORITY
    text += _ASSIGNEE + _default_assignee(task)
    due = task.quick_create_due_date
    if due:
        text += (
            f"- **due-date**: required for this run. Pass `--due-date {due}`; the quick-create "
            "selection is authoritative.\n\n"
        )
    return text + _project(task) + _parent(task) + _CLOSING


def _default_assignee(task: Task) -> str:
    squad_id, squad_name = task.squad_id, task.squad_name
    agent_id, agent_name = task.agent.id, task.agent.name
    if squad_id and squad_name:
        return (
            "    - When the user did NOT name an assignee, default to the picker SQUAD "
            f"{_q(squad_name)}: pass `--assignee-id {_q(squad_id)}` (the squad's UUID). The user "
            "opened quick-create with the squad selected; you (the leader agent) are running on "
            "the squad's behalf, so the squad — not you — is the expected owner. Never leave the "
            "issue unassigned, and do not assign it to your own agent UUID.\n\n"
        )
    if squad_id:
        return (
            "    - When the user did NOT name an assignee, default to the picker SQUAD: pass "
            f"`--assignee-id {_q(squad_id)}` (the squad's UUID). The user opened quick-create "
            "with the squad selected; you (the leader agent) are running on the squad's behalf, "
            "so the squad — not you — is the expected owner. Never leave the issue unassigned, "
            "and do not assign it to your own agent UUID.\n\n"
        )
    if agent_id:
        return (
            "    - When the user did NOT name an assignee, default to YOURSELF: pass "
            f"`--assignee-id {_q(agent_id)}` (your agent UUID). The picker agent is the expected "
            "owner because the user opened quick-create with you selected — never leave the "
            "issue unassigned. Use the UUID flag, not `--assignee <name>`, so the assignment is "
            "unambiguous even when other agents share part of your name.\n\n"
        )
    if agent_name:
        return (
            "    - When the user did NOT name an assignee, default to YOURSELF: pass `--assignee "
            f"{_q(agent_name)}`. The picker agent is the expected owner because the user opened "
            "quick-create with you selected — never leave the issue unassigned.\n\n"
        )
    return _DEFAULT_SELF


def _project(task: Task) -> str:
    pid, ptitle = task.project_id, task.project_title
    if pid and ptitle:
        return (
            f"- **project**: required for this run. Pass `--project {_q(pid)}` so the new issue "
            f"lands in project {_q(ptitle)} (the user picked it in the quick-create modal). Do "
            "not infer a different project from the prompt text — the modal selection is "
            "authoritative.\n"
        )
    if pid:
        return (
            f"- **project**: required for this run. Pass `--project {_q(pid)}` so the new issue "
            "lands in the project the user picked in the quick-create modal. Do not infer a "
            "different project from the prompt text — the modal selection is authoritative.\n"
        )
    return "- **project**: omit. The platform will route the issue to the workspace default.\n"


def _parent(task: Task) -> str:
    parent, pident = task.parent_issue_id, task.parent_issue_identifier
    if parent and pident:
        return (
            f"- **parent**: required for this run. Pass `--parent {_q(parent)}` so the new issue "
            f"is filed as a sub-issue of {pident} (the user opened quick-create from that issue's "
            '"Add sub issue" entry). Do not infer a different parent from the prompt text — the '
            "modal entry point is authoritative.\n"
        )
    if parent:
        return (
            f"- **parent**: required for this run. Pass `--parent {_q(parent)}` so the new issue "
            "is filed as a sub-issue of the parent the user picked in the quick-create modal. Do "
            "not infer a different parent from the prompt text — the modal entry point is "
            "authoritative.\n"
        )
    return ""
