"""Comments folded into a queued run on the Multica-faithful server (Go `handler/daemon.go`).

A comment that mentions an agent whose run on the issue has not started yet joins that run
instead of queueing another (`coalesced_comment_ids`); the trigger stays the newest comment.
The claim then hands out every planned comment, oldest first, within 512 KiB (the trigger
always, then as many of the oldest as fit): to a daemon that names `coalesced-comments-v1` in
`X-Client-Capabilities` the earlier ones come one by one with their threads
(`coalesced_comment_ids`, `coalesced_comments`); any other daemon gets them all folded into
the one field it reads, `trigger_comment_content`, between delimiters naming each comment.

    fake.queue_comment("newest", coalesced=[{"id": ..., "thread_id": ..., "content": ...}])
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

CAPABILITY = "coalesced-comments-v1"
BUDGET = 512 << 10
"""Bytes of comment input one claim carries (Go's `maxClaimCommentPayloadBytes`)."""
LEGACY_HEAD = (
    "This run covers multiple distinct issue comments. Address every comment below in"
    " chronological order; do not treat this bundle as one rewritten comment.\n"
)
_FIELDS = ("id", "thread_id", "author_type", "author_name", "content", "created_at")


def for_claim(body: dict[str, Any], capabilities: str) -> dict[str, Any]:
    """The claim body as a daemon with or without the capability (its `X-Client-Capabilities`,
    on the claim or the control connection) gets it."""
    folded = body.get("coalesced_comments") or []
    if not body.get("trigger_comment_id") or not folded:
        return body
    wanted = {c.strip() for c in capabilities.split(",")}
    legacy = CAPABILITY not in wanted
    trigger = {
        "id": body["trigger_comment_id"],
        "thread_id": body.get("trigger_thread_id") or body["trigger_comment_id"],
        "author_type": body.get("trigger_author_type", ""),
        "author_name": body.get("trigger_author_name", ""),
        "content": body.get("trigger_comment_content", ""),
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),  # the newest
    }
    planned = sorted(
        [{k: c.get(k, "") for k in _FIELDS} for c in folded] + [trigger],
        key=lambda c: (c["created_at"], c["id"]),
    )
    sent = _within_budget(planned, trigger["id"], legacy)
    others = [c for c in sent if c["id"] != trigger["id"]]
    if legacy:
        return {
            **body,
            "trigger_comment_content": legacy_bundle(sent),
            "coalesced_comment_ids": None,
            "coalesced_comments": None,
        }
    listed = [{k: v for k, v in c.items() if v or k in ("id", "content")} for c in others]
    return {
        **body,
        "coalesced_comment_ids": [c["id"] for c in others],
        "coalesced_comments": listed,
    }


def _within_budget(
    planned: list[dict[str, str]], trigger_id: str, legacy: bool
) -> list[dict[str, str]]:
    """The trigger, then the oldest others while they fit, in their order."""
    size = len(LEGACY_HEAD) if legacy else 2
    cost = {c["id"]: _cost(c, legacy) for c in planned}
    chosen = {trigger_id}
    size += cost[trigger_id]
    for comment in planned:
        if comment["id"] == trigger_id:
            continue
        if size + cost[comment["id"]] > BUDGET:
            break
        chosen.add(comment["id"])
        size += cost[comment["id"]]
    return [c for c in planned if c["id"] in chosen]


def _cost(comment: dict[str, str], legacy: bool) -> int:
    if legacy:
        return len(json.dumps(_legacy_entry(comment))) - 2
    return len(json.dumps(comment)) + 1


def legacy_bundle(comments: list[dict[str, str]]) -> str:
    """Every comment in the one trigger field an older daemon reads, each between markers."""
    return (LEGACY_HEAD + "".join(_legacy_entry(c) for c in comments)).strip()


def _legacy_entry(comment: dict[str, str]) -> str:
    head = f"\n--- comment {comment['id']}"
    if comment["thread_id"]:
        head += f" [thread {comment['thread_id']}]"
    if comment["author_type"] or comment["author_name"]:
        name = f": {comment['author_name']}" if comment["author_name"] else ""
        head += f" [author {comment['author_type']}{name}]"
    if comment["created_at"]:
        head += f" [created {comment['created_at']}]"
    return f"{head} ---\n{comment['content']}\n--- end comment {comment['id']} ---\n"
