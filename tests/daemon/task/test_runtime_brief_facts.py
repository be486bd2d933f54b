"""Every fact Multica's own brief gives its agents, checked in ours, kind by kind.

Each row is one fact as a short needle and the task kinds whose brief must carry it; every
other kind's brief must not (a quick-create run told to comment on an issue fails). A lost
fact fails the test named after it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from daemon.protocol.models import Task
from daemon.task.setup.prompt import build_prompt
from daemon.task.setup.runtime_brief import runtime_brief

ISSUE, CHAT, QUICK, AUTO = "issue", "chat", "quick_create", "autopilot"
ALL = (ISSUE, CHAT, QUICK, AUTO)
NOT_QUICK = (ISSUE, CHAT, AUTO)

_KIND_FIELDS: dict[str, dict[str, Any]] = {
    ISSUE: {"issue_id": "I-1", "trigger_comment_id": "c-1"},
    CHAT: {"chat_session_id": "s-1"},
    QUICK: {"quick_create_prompt": "file a bug"},
    AUTO: {
        "autopilot_run_id": "run-7",
        "autopilot_id": "ap-3",
        "autopilot_title": "Nightly triage",
        "autopilot_source": "schedule",
        "autopilot_trigger_payload": {"cron": "0 3 * * *"},
        "autopilot_description": "Sweep stale issues.",
    },
}

# (fact, needle, kinds whose brief carries it)
FACTS: list[tuple[str, str, tuple[str, ...]]] = [
    # The platform and its standing rules.
    ("cli_is_the_door", "through the `multica` CLI", ALL),
    ("turn_end_is_task_end", "marks the task finished as soon as your top-level turn ends", ALL),
    ("no_background_wakeup", "No wake-up comes when background work finishes", ALL),
    ("standing_by_is_final", "never end a turn saying you are standing by", ALL),
    ("no_ci_watch", "no `gh pr checks --watch`, no `gh run watch`", ALL),
    ("merge_gate_not_acceptance", "is not the acceptance criterion of your task", ALL),
    ("ci_handoff_line", "local tests pass; CI is running: <PR link>", ALL),
    ("ci_only_when_asked", "one foreground blocking call (`gh pr checks <pr> --watch`)", ALL),
    ("service_handoff", "answer with its URL, where its logs are and how to stop", ALL),
    ("service_best_effort", "best-effort basis", ALL),
    ("identity_name_and_id", "**You are: Coder** (ID: `ag-1`)", ALL),
    ("identity_instructions", "Prefer small diffs.", ALL),
    ("workspace_context", "We ship on Fridays.", ALL),
    ("no_curl", "never with `curl` or `wget`", ALL),
    ("ask_the_owner", "mentions the workspace owner", ALL),
    ("no_h1_in_issue_body", "without a Markdown H1", ALL),
    # Commands.
    ("json_output", "`--output json`", ALL),
    ("no_merged_streams", "never merge them (`2>&1`)", ALL),
    ("issue_get", "`multica issue get <id> --output json`", NOT_QUICK),
    ("comment_list_roots", "`--roots-only --summary`", NOT_QUICK),
    ("comment_list_thread", "`--thread <comment-id> --tail N`", NOT_QUICK),
    ("recent_counts_threads", "`--recent N` counts threads, not comments", NOT_QUICK),
    ("issue_create", "`multica issue create --title", ALL),
    (
        "create_flags",
        "[--assignee X | --assignee-id <uuid>] [--parent <issue-id>] [--stage N]",
        ALL,
    ),
    ("create_due_date", "[--due-date <YYYY-MM-DD>] [--attachment <path>]", ALL),
    ("description_file", "--description-file", ALL),
    ("description_in_workdir", "never `/tmp`", ALL),
    (
        "quick_description_modes",
        '--description "..." | --description-file <path> | --description-stdin',
        (QUICK,),
    ),
    ("quick_file_outside_refused", "the CLI refuses a file outside it", (QUICK,)),
    ("quick_resolve_assignee", "`multica workspace member list`, `multica agent list`", (QUICK,)),
    ("issue_update", "`multica issue update <id>", NOT_QUICK),
    ("clear_parent", '`--parent ""` removes the parent', NOT_QUICK),
    (
        "issue_assign",
        "`multica issue assign <id> (--to X | --to-id <uuid> | --unassign)",
        NOT_QUICK,
    ),
    ("assign_starts_a_run", "Assigning starts a run for the new owner", NOT_QUICK),
    ("no_start", "`--no-start`", NOT_QUICK),
    ("issue_status", "`multica issue status <id> <status> [--no-start]`", NOT_QUICK),
    (
        "status_values",
        "backlog / todo / in_progress / in_review / done / blocked / cancelled",
        NOT_QUICK,
    ),
    ("issue_children", "`multica issue children <id>", NOT_QUICK),
    ("comment_add_modes", '(--content-file <path> | --content "..." | --content-stdin)', NOT_QUICK),
    ("comment_add_parent_attachment", "[--parent <comment-id>] [--attachment <path>]", NOT_QUICK),
    ("metadata_list", "`multica issue metadata list <issue-id>`", NOT_QUICK),
    ("metadata_set", "--key <k> --value <v> [--type string|number|bool]", NOT_QUICK),
    ("metadata_delete", "`multica issue metadata delete", NOT_QUICK),
    ("repo_checkout", "`multica repo checkout <url> [--ref <branch-or-sha>]`", NOT_QUICK),
    # Comment bodies.
    ("content_file", "post it with `--content-file <path>`", (ISSUE,)),
    ("no_inline_content", "Do not post what you wrote with `--content`", (ISSUE,)),
    ("no_heredoc_stdin", "do not pipe a heredoc through `--content-stdin`", (ISSUE,)),
    ("delete_temp_file", "`rm ./reply.md`", (ISSUE,)),
    ("no_newline_escapes", "do not count on `\\n` escapes", (ISSUE,)),
    # Repositories and project.
    ("repositories_listed", "- https://github.com/o/app.git — the app", NOT_QUICK),
    ("project_title", "the project **Website**", ALL),
    ("project_description", "Keep the old URLs working.", ALL),
    ("project_resource", "GitHub repository https://github.com/o/site (check out `main`)", ALL),
    # Issue-only sections.
    ("metadata_bag", "small key-value `metadata` bag", (ISSUE,)),
    ("metadata_hints", "read it as hints, not facts", (ISSUE,)),
    ("metadata_no_secrets", "never secrets", (ISSUE,)),
    ("working_on_issues_skill", "`multica-working-on-issues` skill", (ISSUE,)),
    ("precedence", "Your agent identity's instructions come before the issue workflow", (ISSUE,)),
    ("precedence_skip_step", "leave that step out and carry on with the rest", (ISSUE,)),
    ("precedence_no_permission", "never gives you permission", (ISSUE,)),
    ("sub_issue_parent", "`multica issue create --parent <issue-id>`", (ISSUE,)),
    ("sub_issue_todo_starts", "`--status todo` starts a child", (ISSUE,)),
    ("sub_issue_backlog", "`--status backlog` keeps it for later", (ISSUE,)),
    ("sub_issue_stages", "`--stage <N>` puts children into stages", (ISSUE,)),
    ("mention_issue", "`[MUL-123](mention://issue/<issue-id>)`", (ISSUE,)),
    ("mention_project", "`[Project name](mention://project/<project-id>)`", (ISSUE,)),
    ("mention_member_notifies", "`[@Name](mention://member/<user-id>)`: notifies", (ISSUE,)),
    ("mention_agent_runs", "`[@Name](mention://agent/<agent-id>)`: starts a new run", (ISSUE,)),
    ("mention_not_to_inform", "a mention is never needed just to inform", (ISSUE,)),
    ("mention_not_for_names", "Writing a name", (ISSUE,)),
    ("mention_thanks_costs", "costs a paid run", (ISSUE,)),
    ("attachments_cli", "`multica attachment --help`", (ISSUE,)),
    ("attachments_no_urls", "never by opening Multica's resource URLs", (ISSUE,)),
    ("attachments_private", "that path is your private copy", (ISSUE,)),
    # Workflows.
    ("issue_same_steps", "Every run on an issue follows the same steps", (ISSUE,)),
    ("issue_read_metadata_in_get", "its JSON already holds the `metadata` bag", (ISSUE,)),
    ("issue_two_reads", "`--roots-only --summary --compact`", (ISSUE,)),
    ("issue_expand_thread", "`--thread <id> --tail 30 --compact`", (ISSUE,)),
    ("issue_in_progress_first", "set it to `in_progress` first", (ISSUE,)),
    ("issue_delegation_only", "A delegation-only role delegates", (ISSUE,)),
    ("issue_sibling_runs", "`## Active sibling runs`", (ISSUE,)),
    ("issue_reply_parent", "with the `--parent` it gives for this turn", (ISSUE,)),
    ("issue_one_reply_per_thread", "one reply per thread", (ISSUE,)),
    ("status_in_review", "awaits acceptance: `in_review`", (ISSUE,)),
    ("status_done_is_human", "Only people set `done`", (ISSUE,)),
    ("status_in_progress", "`in_progress`.\n", (ISSUE,)),
    ("status_blocked", "`blocked`, with a comment", (ISSUE,)),
    ("status_no_deliverable", "change nothing, at any point", (ISSUE,)),
    ("chat_mode", "This is a chat", (CHAT,)),
    ("chat_issue_list", "`multica issue list --output json`", (CHAT,)),
    ("chat_workspace_get", "`multica workspace get --output json`", (CHAT,)),
    ("quick_no_issue", "there is no Multica issue yet", (QUICK,)),
    ("quick_create_once", "Run `multica issue create` exactly once", (QUICK,)),
    ("quick_no_other_calls", "Do not run `multica issue get`, `multica issue status`", (QUICK,)),
    ("quick_no_retry", "without retrying", (QUICK,)),
    ("autopilot_run_only", "run-only mode", (AUTO,)),
    ("autopilot_run_id", "`run-7`", (AUTO,)),
    ("autopilot_id", "- Autopilot: `ap-3`", (AUTO,)),
    ("autopilot_title", "Nightly triage", (AUTO,)),
    ("autopilot_source", "Triggered by: schedule", (AUTO,)),
    ("autopilot_payload", '"cron": "0 3 * * *"', (AUTO,)),
    ("autopilot_instructions", "Sweep stale issues.", (AUTO,)),
    ("autopilot_get", "`multica autopilot get ap-3 --output json`", (AUTO,)),
    (
        "autopilot_issue_guard",
        "unless the autopilot's instructions tell you to create or update",
        (AUTO,),
    ),
    # Output.
    (
        "issue_comment_is_delivery",
        "only as a comment posted with `multica issue comment add`",
        (ISSUE,),
    ),
    ("issue_one_comment", "exactly one comment per run", (ISSUE,)),
    (
        "issue_attachment_flag",
        "pass `--attachment <path>` to `multica issue comment add`",
        (ISSUE,),
    ),
    ("chat_reply_window", "goes straight to the chat window", (CHAT,)),
    ("chat_attachment_upload", "`multica attachment upload <local-path>`", (CHAT,)),
    ("quick_no_comment", "Do not run `multica issue comment add`", (QUICK,)),
    ("quick_created_line", "`Created <identifier-or-id>: <title>`", (QUICK,)),
    ("quick_no_prefix", "never assume a prefix such as `MUL-`", (QUICK,)),
    ("quick_failed_notice", "`quick_create_failed`", (QUICK,)),
    ("autopilot_result", "kept as the autopilot run's result", (AUTO,)),
    ("autopilot_text_only", "text only and carries no attachments", (AUTO,)),
    ("local_paths", "never write an absolute path or a `file://` URL", ALL),
    ("code_locations_inline", "`path/to/file.ts:42`", ALL),
    ("skills_listed", "- **review-checklist**", ALL),
]


def _task(kind: str, **extra: Any) -> Task:
    return Task.model_validate(
        {
            "id": "t-1",
            "agent_id": "ag-1",
            "agent": {
                "id": "ag-1",
                "name": "Coder",
                "instructions": "Prefer small diffs.",
                "skills": [{"name": "review-checklist", "content": "..."}],
            },
            "workspace_context": "We ship on Fridays.",
            "project_id": "p-1",
            "project_title": "Website",
            "project_description": "Keep the old URLs working.",
            "project_resources": [
                {
                    "resource_type": "github_repo",
                    "resource_ref": {"url": "https://github.com/o/site", "ref": "main"},
                }
            ],
            "repos": [{"url": "https://github.com/o/app.git", "description": "the app"}],
            **_KIND_FIELDS[kind],
            **extra,
        }
    )


_CASES = [
    pytest.param(needle, kind, kind in kinds, id=f"{fact}-{kind}")
    for fact, needle, kinds in FACTS
    for kind in ALL
]


@pytest.mark.parametrize(("needle", "kind", "present"), _CASES)
def test_fact(needle: str, kind: str, present: bool) -> None:
    """The fact is in the brief of each kind that needs it and in no other."""
    assert (needle in runtime_brief(_task(kind))) is present


def test_a_comment_run_and_an_assignment_run_get_the_same_brief() -> None:
    """The brief of an issue does not depend on what triggered the run: a resumed session
    reads the same text every time."""
    assigned = _task(ISSUE, trigger_comment_id="")
    assert runtime_brief(_task(ISSUE)) == runtime_brief(assigned)


def test_a_squad_leader_may_end_with_no_action_and_no_comment() -> None:
    """A leader's brief names `squad activity ... no_action` and its role command; a member's
    does not, and still must comment."""
    leader = runtime_brief(_task(ISSUE, is_leader_task=True))
    member = runtime_brief(_task(ISSUE))
    needle = "`multica squad activity <issue-id> no_action --reason"
    assert needle in leader and needle not in member
    assert "`multica squad member set-role <squad-id>" in leader
    assert "a dispatch" not in member and "handing work to members is not delivery" in leader
    assert "This step is not optional" in member


def test_a_project_without_resources_says_so() -> None:
    """A project with no resources is named, with the note that it has none."""
    brief = runtime_brief(_task(ISSUE, project_resources=[]))
    assert "The project has no resources attached." in brief


def test_the_issue_brief_is_within_reach_of_multicas_size() -> None:
    """The issue brief carries Multica's facts: far from the 1.7 KB it once was."""
    assert len(runtime_brief(_task(ISSUE)).encode()) > 10_000


def test_the_requesting_user_is_background_with_a_name_that_cannot_break_markdown() -> None:
    """The user's own description is quoted, marked as background the task outranks; their
    name is one escaped line; no description, no section."""
    task = _task(
        ISSUE,
        requesting_user_name="Ada\n# Heading *bold*",
        requesting_user_profile_description="Backend lead.\r\nPrefers Go.",
    )
    brief = runtime_brief(task)
    assert "You work on behalf of **Ada # Heading \\*bold\\***" in brief
    assert "> Backend lead.\n> Prefers Go.\n" in brief
    assert "the task wins" in brief
    assert "## Requesting user" not in runtime_brief(_task(ISSUE, requesting_user_name="Ada"))


def test_a_workspace_catalog_replaces_the_seven_statuses_by_category() -> None:
    """Custom statuses are listed under their category with name and description; categories
    without one are named as built-in only; a key unsafe in code is dropped; cut entries are
    counted; the workflow says its rules are category rules."""
    statuses = [
        {
            "key": "human_review",
            "name": "Human Review",
            "category": "in_review",
            "description": "a person checks",
        },
        {"key": "planning", "name": "Planning", "category": "in_progress"},
        {"key": "bad`key", "name": "Bad", "category": "todo"},
    ]
    brief = runtime_brief(_task(ISSUE, issue_statuses=statuses, issue_statuses_omitted=2))
    assert (
        "  - `in_progress`: `in_progress` (built-in), `planning` (Planning)\n"
        "  - `in_review`: `in_review` (built-in), `human_review` (Human Review — a person"
        " checks)\n"
        "  - Built-in only: `backlog`, `todo`, `done`, `blocked`, `cancelled`.\n"
        "  - And 2 more custom statuses not listed"
    ) in brief
    assert "bad" not in brief and "Bad" not in brief
    assert "These are category rules" in brief
    plain = runtime_brief(_task(ISSUE))
    assert "These are category rules" not in plain and "Built-in only" not in plain


def test_every_section_a_prompt_points_to_is_in_its_brief() -> None:
    """A prompt that sends the agent to a section of its brief ("## Comment Formatting
    above") names a heading the brief has: a comment-triggered run, with comments folded in
    from two threads, and a plain issue run."""
    folded = [
        {"id": "c-2", "thread_id": "th-2", "content": "second"},
        {"id": "c-3", "thread_id": "th-3", "content": "third"},
    ]
    tasks = [
        _task(ISSUE, trigger_comment_content="please look", coalesced_comments=folded),
        _task(ISSUE, trigger_comment_content="please look"),
        _task(ISSUE, trigger_comment_id=None),
    ]
    pointed = 0
    for task in tasks:
        brief = runtime_brief(task)
        for heading in re.findall(r"`?(## [A-Z][\w ]*?)`? above", build_prompt(task)):
            pointed += 1
            assert f"\n{heading}\n" in brief, heading
    assert pointed >= 2
