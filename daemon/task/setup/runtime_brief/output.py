"""Where each kind of task delivers its result and its files, and the rule every kind shares:
a path on this machine is never a deliverable."""

from __future__ import annotations

from daemon.task.setup.chat_prompt import channel_name
from daemon.task.setup.runtime_brief.kind import BriefKind

_ISSUE = (
    "Your result reaches the user only as a comment posted with `multica issue comment add`:"
    " they see neither your terminal output nor the run's logs.\n\n"
    "Post exactly one comment per run, your final result, before the turn ends: no progress"
    " notes or plans along the way. Keep it short and natural: say what came out, not how"
    " you got there.\n\n"
    "Files: pass `--attachment <path>` to `multica issue comment add` (as often as needed);"
    " that is the only way a screenshot or other file reaches the reader.\n"
)

_LEADER = (
    "Your result reaches the user only as a comment posted with `multica issue comment add`,"
    " unless your outcome is `no_action`: then `multica squad activity <issue-id> no_action"
    ' --reason "..."` alone is enough and you end without a comment, not even one that'
    " says you are staying silent. Every other outcome (`action`, `failed`) needs its"
    " comment.\n\n"
    "Post exactly one comment per run, your final result, before the turn ends: no progress"
    " notes or plans along the way. Keep it short and natural.\n\n"
    "Files: pass `--attachment <path>` to `multica issue comment add` (as often as needed);"
    " that is the only way a screenshot or other file reaches the reader.\n"
)

_CHAT = (
    "Your reply goes straight to the chat window the user is reading.\n\n"
    "Files: `multica attachment upload <local-path>` binds a file to your reply, shown as an"
    " attachment card; it is the only way a file reaches the user, a path in your text is"
    " not.\n"
)

_QUICK_CREATE = (
    "There is no issue to comment on: your final output is captured, and the platform"
    " notifies the user whether `multica issue create` succeeded.\n\n"
    "- Do not run `multica issue comment add`.\n"
    "- After a successful create, print exactly one last line: `Created"
    " <identifier-or-id>: <title>`, with the new issue's `identifier` from the JSON output"
    " (its `id` when there is none); never assume a prefix such as `MUL-`.\n"
    "- When the CLI fails, its error is your only output: the platform turns it into a"
    " `quick_create_failed` notice for the user.\n\n"
    "Files: a file that belongs to the new issue goes on the `multica issue create` call as"
    " `--attachment <path>`, never as a path in the description or the last line.\n"
)

_AUTOPILOT = (
    "There may be no issue to comment on: your final output is kept as the autopilot run's"
    " result. Keep it short and say how it came out.\n\n"
    "Files: the result is text only and carries no attachments; describe what you made"
    " instead of linking its path.\n"
)

# Agents linked screenshots by their path on the machine that ran them: a dead link for every
# reader, and a broken page when clicked.
_LOCAL_PATHS = (
    "**A path on this machine is never a deliverable.** Your working directory exists only"
    " here: never write an absolute path or a `file://` URL as a link or an embedded image."
    " Name code locations as inline code, not links (`path/to/file.ts:42`). Deliver files"
    " the way described above; where there is none, say so in words rather than linking a"
    " path as if the file had been delivered.\n\n"
)


def _channel_chat(channel: str) -> str:
    # Whether a file reaches an IM conversation can change between turns of one resumed
    # session, and this brief is the cached prefix: the turn's own message says it.
    return (
        "Your reply goes straight to the chat the user is reading.\n\n"
        "Files: whether a file you make can reach this"
        f" {channel_name(channel)} conversation depends on how this deployment is set up, so"
        " each turn's message says it. Do what it says, and never call a file delivered unless"
        " it told you how to deliver one.\n"
    )


def output(kind: BriefKind, leader: bool, channel: str = "") -> str:
    """The Output section for this kind of task (`channel`: the IM channel behind a chat)."""
    body = {
        BriefKind.ISSUE: _LEADER if leader else _ISSUE,
        BriefKind.CHAT: _channel_chat(channel) if channel else _CHAT,
        BriefKind.QUICK_CREATE: _QUICK_CREATE,
        BriefKind.AUTOPILOT: _AUTOPILOT,
    }[kind]
    return "## Output\n\n" + body + "\n" + _LOCAL_PATHS
