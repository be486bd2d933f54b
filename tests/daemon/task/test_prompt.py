"""Tests for the prompts built from a Multica claim, word for word as Multica's daemon."""

from __future__ import annotations

from typing import Any

import pytest

from daemon.protocol.models import Task
from daemon.task.setup.prompt import build_prompt, task_kind

AGENT = {"id": "ag-1", "name": "Coder"}


def _task(**fields: Any) -> Task:
    return Task.model_validate({"id": "t-1", "agent": AGENT, **fields})


def test_a_servers_prompt_passes_through() -> None:
    """The embedded server's whole prompt is used unchanged."""
    assert build_prompt(_task(prompt="Do X", issue_id="I-1")) == "Do X"


def test_an_assigned_issue_gets_multicas_issue_prompt() -> None:
    """No prompt and an issue id: Go's issue prompt, exactly."""
    expected = (
        "You are running as a local coding agent for a Multica workspace.\n\n"
        "Your assigned issue ID is: I-1\n\n"
        "Start by running `multica issue get I-1 --output json` to understand your task, then"
        " complete it.\n"
        "For comment history, follow the rule in your runtime workflow file"
        " (assignment-triggered tasks treat the read as mandatory). Scan the threads first with"
        " `multica issue comment list I-1 --roots-only --summary --compact --output json`, then"
        " expand only what matters with `--thread <thread-id> --tail 30`. For `--since`"
        " incremental polling, pagination, and folding, see `multica issue comment list"
        " --help`.\n"
    )
    assert build_prompt(_task(issue_id="I-1")) == expected


def test_a_handoff_note_is_quoted_before_the_first_step() -> None:
    """The assigner's note comes between the issue id and `multica issue get`."""
    text = build_prompt(_task(issue_id="I-1", handoff_note="Only fix the typo"))
    assert "\n\n> Only fix the typo\n\nStart by running" in text
    assert "do not reply to it as if it were a comment:" in text


@pytest.mark.parametrize(
    ("author", "name", "label"),
    [
        ("member", "", "A user"),
        ("system", "", "The platform"),
        ("agent", "Reviewer", "Another agent (Reviewer)"),
        ("agent", "", "Another agent (another agent)"),
    ],
)
def test_a_comment_names_its_author(author: str, name: str, label: str) -> None:
    """The triggering comment is quoted under a label for who wrote it."""
    task = _task(
        issue_id="I-1",
        trigger_comment_id="c-9",
        trigger_comment_content="please rebase",
        trigger_author_type=author,
        trigger_author_name=name,
    )
    text = build_prompt(task)
    assert f"[NEW COMMENT] {label} just left a new comment." in text
    assert "\n\n> please rebase\n\n" in text
    assert "then decide how to proceed.\n\n" in text


def test_a_comment_reply_targets_the_trigger_comment() -> None:
    """The reply command uses the triggering comment as `--parent`."""
    text = build_prompt(_task(issue_id="I-1", trigger_comment_id="c-9"))
    assert "    multica issue comment add I-1 --parent c-9 --content-file ./reply.md\n" in text
    assert text.endswith("the file preserves real newlines.\n")


def test_a_cold_comment_run_reads_the_triggering_thread() -> None:
    """Without a prior session, the agent reads the trigger's thread first."""
    task = _task(issue_id="I-1", trigger_comment_id="c-9", trigger_thread_id="th-1")
    text = build_prompt(task)
    assert "Read the triggering conversation first: `multica issue comment list I-1" in text
    assert "--thread th-1 --tail 30 --compact --output json`" in text


def test_a_resumed_comment_run_is_told_it_resumes() -> None:
    """With a prior session and no new comments, the resumed hint falls back to the comment."""
    task = _task(issue_id="I-1", trigger_comment_id="c-9", prior_session_id="s-1")
    text = build_prompt(task)
    assert "You're resuming the prior session" in text
    assert "--thread c-9 --tail 30" in text


def test_new_comments_since_the_last_run_are_counted() -> None:
    """A warm run with new comments reads the delta of the trigger's thread."""
    task = _task(
        issue_id="I-1",
        trigger_comment_id="c-9",
        new_comment_count=3,
        new_comments_since="2026-01-01T00:00:00Z",
    )
    text = build_prompt(task)
    assert text.count("3 new comment(s) on this issue since your last run") == 1
    assert "--thread c-9 --since 2026-01-01T00:00:00Z --compact" in text


def test_a_chat_message_is_the_user_message() -> None:
    """A web chat task quotes the message for a direct room."""
    text = build_prompt(_task(chat_session_id="cs-1", chat_message="hello?"))
    assert text.startswith(
        "You are running as a chat assistant for a Multica workspace.\n"
        "Audience: direct room.\n\nUser message:\nhello?\n"
    )
    assert "`multica attachment upload <local-path>`" in text


def test_an_autopilot_run_gets_its_instructions_and_config_step() -> None:
    """Run id, autopilot id, title, source, payload and description, then `autopilot get`."""
    task = _task(
        autopilot_run_id="run-1",
        autopilot_id="ap-1",
        autopilot_title="Nightly",
        autopilot_source="webhook",
        autopilot_trigger_payload={"ref": "main"},
        autopilot_description="Check the build.",
    )
    text = build_prompt(task)
    assert "There is no assigned Multica issue for this run.\n\nAutopilot run ID: run-1\n" in text
    assert "Autopilot ID: ap-1\nAutopilot title: Nightly\nTrigger source: webhook\n" in text
    assert 'Trigger payload:\n{"ref": "main"}\n' in text
    assert "\nAutopilot instructions:\nCheck the build.\n\n" in text
    assert text.endswith(
        "Start by running `multica autopilot get ap-1 --output json` if you need the full"
        " autopilot configuration, then complete the instructions above.\n"
    )


def test_an_autopilot_without_instructions_says_so() -> None:
    """No description, title or id: the agent is told to inspect the configuration."""
    text = build_prompt(_task(autopilot_run_id="run-1"))
    assert "No additional autopilot instructions were provided." in text
    assert text.endswith("Complete the instructions above.\n")


def test_quick_create_builds_one_issue_with_the_pickers_choices() -> None:
    """Priority, due date, project and parent chosen in the modal are passed as flags."""
    task = _task(
        quick_create_prompt="add dark mode",
        quick_create_priority="high",
        quick_create_due_date="2026-12-01",
        project_id="p-1",
        project_title="Web",
        parent_issue_id="par-1",
        parent_issue_identifier="MUL-7",
    )
    text = build_prompt(task)
    assert text.startswith("You are running as a quick-create assistant for a Multica workspace.")
    assert "User input:\n> add dark mode\n\nField rules:\n\n" in text
    assert "Pass `--priority high`; the quick-create selection is authoritative." in text
    assert "Pass `--due-date 2026-12-01`" in text
    assert 'Pass `--project "p-1"` so the new issue lands in project "Web"' in text
    assert 'Pass `--parent "par-1"` so the new issue is filed as a sub-issue of MUL-7' in text
    assert 'default to YOURSELF: pass `--assignee-id "ag-1"` (your agent UUID).' in text
    assert text.endswith("The platform writes a failure notification automatically.\n")


def test_quick_create_defaults_to_the_picked_squad() -> None:
    """With a squad picked, the squad, not the leader agent, is the default assignee."""
    text = build_prompt(_task(quick_create_prompt="x", squad_id="sq-1", squad_name="Ops"))
    assert 'default to the picker SQUAD "Ops": pass `--assignee-id "sq-1"`' in text
    assert "- **project**: omit." in text
    assert "one of `urgent`, `high`, `medium`, `low`, or omit." in text


def test_quick_create_without_an_agent_names_no_uuid() -> None:
    """No agent in the claim: the agent is told to use its own UUID or name."""
    task = Task.model_validate({"id": "t", "quick_create_prompt": "x"})
    assert "pass `--assignee-id <your agent UUID>` (preferred)" in build_prompt(task)


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"chat_session_id": "c", "trigger_comment_id": "x"}, "chat"),
        ({"trigger_comment_id": "x", "autopilot_run_id": "r"}, "comment"),
        ({"autopilot_run_id": "r", "quick_create_prompt": "q"}, "autopilot"),
        ({"quick_create_prompt": "q", "issue_id": "i"}, "quick_create"),
        ({"issue_id": "i"}, "issue"),
    ],
)
def test_the_kind_is_chosen_in_multicas_order(fields: dict[str, str], kind: str) -> None:
    """Chat, then comment, then autopilot, then quick-create, else issue."""
    assert task_kind(_task(**fields)) == kind


def test_a_lost_session_is_told_the_way_its_surface_can_recover() -> None:
    """An issue points at its comments, a chat at `multica chat history`; both end the prompt."""
    issue = build_prompt(_task(issue_id="I-1"), session_lost=True)
    assert issue.startswith(build_prompt(_task(issue_id="I-1")) + "\n## Session Continuity Notice")
    assert "full comment history are unaffected" in issue
    assert issue.endswith("never wrote down.\n\n")
    chat = build_prompt(_task(chat_session_id="c", chat_message="hi"), session_lost=True)
    assert "`multica chat history`" in chat and chat.endswith("actually matters.\n\n")
    assert "Session Continuity" not in build_prompt(_task(issue_id="I-1"))
