"""The prompt of a comment-triggered run, word for word as Multica's daemon writes it.

The triggering comment is quoted so a stale file in a reused work dir cannot distract the
agent. Comments posted while the run was still queued are folded into it (the claim's
`coalesced_comments`, sent to a daemon that announces `coalesced-comments-v1`): each is quoted
with its own thread, and when they span more than one thread the agent answers each thread in
that thread — the newest comment of each is the `--parent` of its reply — instead of merging
them into one comment under the trigger. The reply target is given on every turn, so a resumed
session never reuses a `--parent` from an earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.protocol.models import CoalescedComment, Task
from daemon.task.setup.runtime_brief.kind import leads_a_squad

LOCAL_AGENT = "You are running as a local coding agent for a Multica workspace.\n\n"


@dataclass(frozen=True, slots=True)
class ReplyTarget:
    """One thread a run answers, and the comment its reply nests under."""

    thread_id: str
    parent_id: str


def comment_prompt(task: Task) -> str:
    """A comment mentioned the agent: answer that comment (and the folded ones), in thread."""
    issue = task.issue_id
    leader = leads_a_squad(task)
    text = LOCAL_AGENT + f"Your assigned issue ID is: {issue}\n\n"
    if task.trigger_comment_content:
        label = _author(task.trigger_author_type, task.trigger_author_name)
        text += (
            f"[NEW COMMENT] {label} just left a new comment. Focus on THIS comment — do"
            " not confuse it with previous ones:\n\n"
            f"> {task.trigger_comment_content}\n\n"
        )
        text += _folded(task)
        if leader:
            text += (
                "⚠️ **Squad leader no_action rule:** If you decide no action is needed, call"
                f' `multica squad activity {issue} no_action --reason "..."` and EXIT. DO NOT'
                ' post any comment — not even one that says "no action needed" or "exiting'
                ' silently". The squad activity call records your decision; a comment is'
                " redundant noise.\n\n"
            )
    text += (
        f"Start by running `multica issue get {issue} --output json` to understand your task,"
        " then decide how to proceed.\n\n"
    )
    text += _comments_hint(task)
    targets = reply_targets(task)
    if len(targets) >= 2:
        return text + _fan_out(targets, leader)
    return text + _reply_instructions(task, leader) if task.trigger_comment_id else text


def reply_targets(task: Task) -> list[ReplyTarget]:
    """The threads this run answers, oldest first, each with the newest comment of its own
    that triggered the run (the trigger last, so it wins its thread). A comment without a
    thread id is a root: its own thread."""
    if not task.trigger_comment_id:
        return []
    parents: dict[str, str] = {}  # insertion order is the order threads were first seen
    for comment in task.coalesced_comments:
        parents[comment.thread_id or comment.id] = comment.id
    parents[task.trigger_thread_id or task.trigger_comment_id] = task.trigger_comment_id
    return [ReplyTarget(thread, parent) for thread, parent in parents.items()]


def _author(kind: str, name: str, named_member: bool = False) -> str:
    if kind == "system":
        return "The platform"
    if kind == "agent":
        return f"Another agent ({name or 'another agent'})"
    # The trigger is "A user" whatever its author's name; a folded comment names its member.
    return name if named_member and name else "A user"


def _folded(task: Task) -> str:
    """The comments folded into the run: quoted one by one, or (an older server that sends
    only their ids) named, with how to fetch each."""
    issue = task.issue_id
    if task.coalesced_comments:
        text = (
            f"This run also covers {len(task.coalesced_comments)} earlier comment(s) posted"
            " before it started — you must read and address them too, not just the one above."
            " They may be in different threads, so each is reproduced here with its own"
            " thread:\n\n"
        )
        text += "".join(_quoted(c) for c in task.coalesced_comments)
        return text + (
            "\nIf you need the surrounding discussion for any of them, fetch its thread with"
            f" `multica issue comment list {issue} --thread <thread-id> --tail 30 --compact"
            " --output json` using the thread id shown above.\n\n"
        )
    if not task.coalesced_comment_ids:
        return ""
    ids = task.coalesced_comment_ids
    text = (
        f"This run also covers {len(ids)} earlier comment(s) posted before it started — you"
        f" must read and address every one of them, not just the one above: {', '.join(ids)}."
        " They may be in DIFFERENT threads, so do not assume they share the triggering"
        " thread.\n\n"
    )
    if task.new_comments_since:
        text += (
            f"Start with `multica issue comment list {issue} --since {task.new_comments_since}"
            " --compact --output json`. Treat that as a candidate window, not a guarantee — it"
            " also carries unrelated comments, and a retried run can carry ids older than the"
            " window. Check every id above against the result.\n\n"
        )
    return text + (
        f"Fetch each id you still need directly: `multica issue comment list {issue} --thread"
        " <comment-id> --tail 30 --compact --output json`. `--thread` accepts a reply id, not"
        " just a thread root, so you do not need to know which thread the comment lives in. If"
        " it is older than those 30 replies, page back with the `Next reply cursor` values"
        " (`--before` / `--before-id`) until it appears. Do not finish this turn until every id"
        " above is accounted for.\n\n"
    )


def _quoted(comment: CoalescedComment) -> str:
    label = _author(comment.author_type, comment.author_name, named_member=True)
    when = f", {comment.created_at}" if comment.created_at else ""
    thread = f" [thread {comment.thread_id}]" if comment.thread_id else ""
    body = comment.content.strip().replace("\n", "\n  > ")
    return f"- comment {comment.id} ({label}{when}){thread}:\n  > {body}\n"


def _comments_hint(task: Task) -> str:
    """Where to read: the trigger's thread since the last run, or the resumed or cold read."""
    issue = task.issue_id
    thread = task.trigger_thread_id or task.trigger_comment_id
    since = task.new_comments_since
    if task.new_comment_count > 0 and since and issue:
        if not thread:
            return (
                f"{task.new_comment_count} new comment(s) on this issue since your last run."
                f" Catch up: `multica issue comment list {issue} --since {since} --compact"
                " --output json`.\n\n"
            )
        return (
            f"{task.new_comment_count} new comment(s) on this issue since your last run — don't"
            " read them all blindly. Start with the thread your triggering comment is in:"
            f" `multica issue comment list {issue} --thread {thread} --since {since} --compact"
            " --output json` (swap `--since` for `--tail 30` if you need the full thread, not just"
            " the delta). Only if you need context from the other threads, rerun it without"
            " `--thread` for the issue-wide catch-up.\n\n"
        )
    if task.prior_session_id:
        if not (issue and thread):
            return ""
        return (
            "You're resuming the prior session, and the triggering comment is already included"
            " above. No other new comments on this issue since your last run. If your reply"
            " depends on thread context, do not rely only on resumed session memory — first pull"
            f" the triggering conversation with: `multica issue comment list {issue} --thread"
            f" {thread} --tail 30 --compact --output json`.\n\n"
        )
    if issue and thread:
        return (
            f"Read the triggering conversation first: `multica issue comment list {issue}"
            f" --thread {thread} --tail 30 --compact --output json` (that thread's root + its 30"
            " newest replies). Need cross-thread background? Rerun with `--roots-only --summary`"
            " replacing `--thread ... --tail 30` to scan the other threads cheaply, and expand"
            " only what looks relevant.\n\n"
        )
    return (
        f"Read the discussion: scan with `multica issue comment list {issue} --roots-only"
        " --summary --compact --output json`, then expand what matters with `--thread"
        " <thread-id> --tail 30`.\n\n"
    )


def _reply_instructions(task: Task, leader: bool) -> str:
    if leader:
        lead = "Unless your outcome is `no_action`, post your reply as a comment"
    else:
        lead = "Post your reply as a comment"
    return (
        f"{lead} — always use the trigger comment ID below, do NOT reuse --parent values from"
        " previous turns in this session.\n\n"
        "Write the body file first (rules: ## Comment Formatting above — MUL-2904 / #4182):\n\n"
        f"    multica issue comment add {task.issue_id} --parent {task.trigger_comment_id}"
        " --content-file ./reply.md\n"
        "    rm ./reply.md\n\n"
        "Do NOT write literal `\\n` escapes to simulate line breaks; the file preserves real"
        " newlines.\n"
    )


def _fan_out(targets: list[ReplyTarget], leader: bool) -> str:
    """One reply per thread, oldest thread first: this run's exception to "one comment"."""
    count = len(targets)
    lead = f"This run coalesced comments from {count} DISTINCT threads. "
    if leader:
        lead += (
            "**If your outcome is `no_action`, skip this ENTIRE fan-out block — post no replies"
            " at all and exit via `multica squad activity` as your leader rules direct;"
            " everything below applies only otherwise.** Otherwise, post"
        )
    else:
        lead += "Post"
    lines = "".join(
        f"{n}. thread {t.thread_id} → reply with `--parent {t.parent_id}`\n"
        for n, t in enumerate(targets, 1)
    )
    return (
        f'{lead} ONE reply per thread — {count} in total. This OVERRIDES the "post exactly one'
        ' comment per run" rule: for THIS run multiple replies are required and correct. Do NOT'
        " merge separate threads into one comment or post twice in the same thread.\n\n"
        "Reply targets, in posting order — OLDEST thread first, the newest (triggering) thread"
        " LAST. Use the exact `--parent` for each; never reuse a `--parent` from an earlier"
        f" turn:\n{lines}\n"
        "Write and post each reply exactly as `## Comment Formatting` above directs, with ONE"
        " multi-thread delta: use a DISTINCT body file per thread (./reply-1.md, ./reply-2.md,"
        " …) so one reply's content can never leak into another's.\n"
    )
