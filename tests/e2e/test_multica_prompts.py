"""What a Multica claim becomes in the agent's prompt, through the daemon, against the
Multica-faithful server: folded comments answered thread by thread, a chat turn's attachments,
skills, channel and per-run blocks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import running_daemon

pytestmark = pytest.mark.anyio

# A `command` agent whose result is the prompt it was given.
PROMPT_AGENT = """
import json, sys
print(json.dumps({"type": "result", "output": sys.stdin.read()}))
"""


def _agent(tmp_path: Path) -> dict[str, str]:
    agent = tmp_path / "agent.py"
    agent.write_text(PROMPT_AGENT)
    return {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(agent)}


async def _prompt(fake: MulticaFake, task_id: str) -> str:
    task = await fake.finished(task_id)
    assert task.status == "completed", task.error
    return task.output


async def test_comments_folded_into_a_run_are_answered_each_in_its_thread(
    tmp_path: Path,
) -> None:
    """The daemon names `coalesced-comments-v1`, so the claim carries the two earlier comments
    one by one; the prompt quotes each with its thread and asks for a reply in each of the
    two threads, the newest comment of each as `--parent`."""
    folded = [
        {
            "id": "c-1",
            "thread_id": "th-1",
            "author_type": "member",
            "author_name": "Ann",
            "content": "Can you also bump the version?",
            "created_at": "2026-01-01T10:00:00Z",
        },
        {
            "id": "c-2",
            "thread_id": "th-9",
            "author_type": "agent",
            "author_name": "Linter",
            "content": "Style check failed.",
            "created_at": "2026-01-01T10:01:00Z",
        },
    ]
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **_agent(tmp_path)):
        task_id = fake.queue_comment(
            "Please rebase.",
            "issue-1",
            coalesced=folded,
            provider="command",
            trigger_comment_id="c-9",
            trigger_thread_id="th-9",
        )
        prompt = await _prompt(fake, task_id)
        claimed = fake.tasks[task_id].claimed
    assert claimed is not None and claimed["coalesced_comment_ids"] == ["c-1", "c-2"]
    assert "[NEW COMMENT] A user just left a new comment." in prompt
    assert "> Please rebase.\n\nThis run also covers 2 earlier comment(s)" in prompt
    assert (
        "- comment c-1 (Ann, 2026-01-01T10:00:00Z) [thread th-1]:\n"
        "  > Can you also bump the version?\n"
        "- comment c-2 (Another agent (Linter), 2026-01-01T10:01:00Z) [thread th-9]:\n"
        "  > Style check failed.\n"
    ) in prompt
    assert "This run coalesced comments from 2 DISTINCT threads." in prompt
    assert (
        "1. thread th-1 → reply with `--parent c-1`\n2. thread th-9 → reply with `--parent c-9`\n"
    ) in prompt
    assert "--- comment c-1" not in prompt  # not the bundle an older daemon is sent


async def test_a_chat_turn_lists_its_attachments_skills_and_channel(tmp_path: Path) -> None:
    """A Slack group chat whose message picks a skill and carries a file, from a member, after
    a session the server could not restore: each becomes Go's part of the prompt."""
    skills = [{"id": "sk-1", "name": "deploy", "description": "d", "content": "Deploy it."}]
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **_agent(tmp_path)):
        task_id = fake.queue_chat(
            "Ship it with [/deploy](slash://skill/sk-1)",
            provider="command",
            agent={"skills": skills},
            chat_channel_type="slack",
            chat_type="group",
            chat_message_attachments=[
                {"id": "att-1", "filename": "log.txt", "content_type": "text/plain"}
            ],
            initiator_type="member",
            initiator_name="Ann",
            initiator_email="ann@example.com",
            prior_session_resume_unavailable=True,
        )
        prompt = await _prompt(fake, task_id)
    assert prompt.startswith(
        "You are running as a chat assistant for a Multica workspace.\n"
        "Audience: group room; not private; unseen members may read replies.\n\n"
        "You are operating inside a Slack conversation — not the Multica web app."
    )
    assert "start with `multica chat history` to see the channel" in prompt
    assert "Explicitly selected skills:\n- deploy\n\nUser message:\nShip it with" in prompt
    assert (
        'Attachments on this message:\n- id=att-1 filename="log.txt" content_type=text/plain\n'
        "Use `multica attachment download <id>` to fetch each file locally"
    ) in prompt
    assert "This reply is delivered to Slack as text." in prompt
    notice = prompt.index("## Session Continuity Notice")
    assert "read it back with `multica chat history` / `multica chat thread`" in prompt
    assert prompt.index("## Task Initiator") > notice
    assert "initiated by **Ann** (ann@example.com), a member of this workspace." in prompt


async def test_an_issue_run_is_told_of_its_agents_other_runs(tmp_path: Path) -> None:
    """The claim's in-flight sibling runs are listed after the issue prompt."""
    siblings = [
        {
            "task_id": "tk-2",
            "issue_id": "i-2",
            "issue_identifier": "MUL-2",
            "issue_title": "Fix login",
            "status": "running",
            "created_at": "2026-01-01T09:00:00Z",
            "started_at": "2026-01-01T09:01:00Z",
        }
    ]
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **_agent(tmp_path)):
        task_id = fake.queue_issue("issue-1", provider="command", active_sibling_runs=siblings)
        prompt = await _prompt(fake, task_id)
    assert "see `multica issue comment list --help`.\n\n## Active sibling runs\n\n" in prompt
    assert (
        "- MUL-2 — task `tk-2`, status `running`, started 2026-01-01T09:01:00Z: Fix login;"
        " inspect: `multica issue run-messages tk-2`\n"
    ) in prompt
