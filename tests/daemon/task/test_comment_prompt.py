"""Comments folded into a queued run: each quoted with its thread, each thread answered."""

from __future__ import annotations

from typing import Any

from daemon.protocol.models import Task
from daemon.task.setup.comment_prompt import ReplyTarget, reply_targets
from daemon.task.setup.prompt import build_prompt


def _task(**fields: Any) -> Task:
    base = {"id": "t", "issue_id": "I-1", "trigger_comment_id": "c-9", "trigger_thread_id": "th-9"}
    return Task.model_validate({**base, "trigger_comment_content": "newest", **fields})


def _comment(cid: str, thread: str = "", **fields: str) -> dict[str, str]:
    return {"id": cid, "thread_id": thread, "content": f"text of {cid}", **fields}


def test_each_thread_is_answered_under_its_newest_comment() -> None:
    """Threads in the order first seen, the trigger's last; a thread's newest comment is the
    parent of its reply; a root comment is a thread of its own."""
    folded = [
        _comment("c-1", "th-1"),
        _comment("c-2", "th-9"),
        _comment("c-3"),
        _comment("c-4", "th-1"),
    ]
    assert reply_targets(_task(coalesced_comments=folded)) == [
        ReplyTarget("th-1", "c-4"),
        ReplyTarget("th-9", "c-9"),
        ReplyTarget("c-3", "c-3"),
    ]


def test_comments_of_the_triggers_thread_keep_one_reply() -> None:
    """Folded comments all in the trigger's thread: one reply, under the trigger."""
    text = build_prompt(_task(coalesced_comments=[_comment("c-1", "th-9")]))
    assert "DISTINCT threads" not in text
    assert "--parent c-9 --content-file ./reply.md" in text
    assert "- comment c-1 (A user) [thread th-9]:\n  > text of c-1\n" in text


def test_two_threads_get_a_reply_each() -> None:
    """Comments in another thread: one reply per thread, oldest first, distinct body files."""
    text = build_prompt(_task(coalesced_comments=[_comment("c-1", "th-1", author_name="Ann")]))
    assert "- comment c-1 (Ann) [thread th-1]:\n" in text
    assert "This run coalesced comments from 2 DISTINCT threads. Post ONE reply per thread" in text
    assert (
        "1. thread th-1 → reply with `--parent c-1`\n2. thread th-9 → reply with `--parent c-9`\n"
        in text
    )
    assert "--content-file ./reply.md" not in text


def test_a_server_sending_only_ids_gets_them_fetched() -> None:
    """Ids without bodies: named, with the per-id fetch and no fan-out."""
    text = build_prompt(_task(coalesced_comment_ids=["c-1", "c-2"]))
    assert "address every one of them, not just the one above: c-1, c-2." in text
    assert "--thread <comment-id> --tail 30" in text


def test_a_claim_with_junk_in_the_lists_still_runs() -> None:
    """Entries that are not objects are dropped, nulls read as empty."""
    task = _task(
        coalesced_comments=["x", None, _comment("c-1", "th-1")], coalesced_comment_ids=None
    )
    assert [c.id for c in task.coalesced_comments] == ["c-1"]
    assert task.coalesced_comment_ids == []
