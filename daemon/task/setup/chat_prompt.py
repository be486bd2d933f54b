"""The prompt of a chat turn, word for word as Multica's daemon writes it.

A chat is the web chat or a conversation in an IM channel (Slack, Feishu/Lark, WeCom,
DingTalk) bound to a Multica chat session. Every turn says who may read the reply (a group
room is not private), where the conversation's history can be read back (Slack's live
channel, a transcript Multica stored, or nowhere), the skills the user picked with `/skill`,
the message's attachments by id (their signed URLs expire before the agent gets to them:
`multica attachment download <id>` signs afresh), and whether a file the agent makes can
reach the conversation. Those answers change from turn to turn of one resumed session, so
they live here rather than in the runtime brief, which is the cached prefix.
"""

from __future__ import annotations

import re

from daemon.protocol.models import ChatAttachment, Task

SLACK = "slack"
_NAMES = {SLACK: "Slack", "feishu": "Feishu/Lark", "wecom": "WeCom", "dingtalk": "DingTalk"}
_STORED = frozenset({"", "feishu", "wecom", "dingtalk"})
"""Surfaces whose conversation Multica keeps as a transcript `multica chat history` reads."""
_SLASH_SKILL = re.compile(r"\[/((?:[^\]\\]|\\.)+)\]\(slash://skill/([^)]+)\)")
_HEAD = "You are running as a chat assistant for a Multica workspace.\n"
_UPLOAD_WEB = (
    "\nTo include a file or image you produced in your reply, run `multica attachment upload"
    " <local-path>`. The file binds to your reply automatically and appears as an attachment"
    " card below it even if you paste nothing. The command also returns a `markdown` snippet"
    " you may paste on its own line to place the item where you want it (files render as a"
    " card, images inline).\n"
)


def channel_name(channel: str) -> str:
    """How the prompt and the brief name a channel (an unknown one by its own word)."""
    return _NAMES.get(channel, channel)


def stores_transcript(channel: str) -> bool:
    """Whether `multica chat history` can read this surface's conversation back."""
    return channel in _STORED


def chat_prompt(task: Task) -> str:
    """A message in a chat with the agent, on the web or in an IM channel."""
    if task.chat_intro:
        return _HEAD + (
            "You were just created, and this is the very first message in a direct chat with the"
            " person who created you. They have not written anything yet — you are opening the"
            " conversation. Send a short, warm, first-person introduction: who you are, what"
            " you're good at, and how they can work with you. Do NOT phrase it as an answer to a"
            " question or repeat any prompt back; just introduce yourself as if you reached out"
            " first.\n"
        )
    text = _HEAD + _audience(task) + _channel(task.chat_channel_type, task.chat_in_thread)
    text += _selected_skills(task)
    text += f"User message:\n{task.chat_message}\n"
    text += _attachments(task.chat_message_attachments)
    return text + _delivery(task)


def _audience(task: Task) -> str:
    # "Unknown" is not "private": an IM room whose shape the server did not say may be large.
    if task.chat_type == "group":
        return "Audience: group room; not private; unseen members may read replies.\n\n"
    if task.chat_type == "p2p" or not task.chat_channel_type:
        return "Audience: direct room.\n\n"
    return "Audience: unknown.\n\n"


def _channel(channel: str, in_thread: bool) -> str:
    """Where an IM conversation lives and how to read it; nothing for the web chat."""
    if not channel:
        return ""
    name = channel_name(channel)
    text = (
        f"You are operating inside a {name} conversation — not the Multica web app. Never look"
        " in Multica issues or comments for this conversation.\n"
    )
    if channel == SLACK:
        text += (
            f"This conversation and its history live in {name}, NOT in Multica. The message"
            " below may be only what triggered you. Read the conversation with:\n"
            "- `multica chat history --output json` — the channel overview: recent top-level"
            " messages, each thread tagged with a `thread_id` and `reply_count`. It does NOT"
            " expand thread contents.\n"
            "- `multica chat thread [<thread_id>] --output json` — read one thread's messages;"
            " omit the id to read the thread you are in, or pass a `thread_id` from the overview"
            " to read a specific thread.\n"
        )
        if in_thread:
            text += (
                "You were @mentioned inside a thread: start with `multica chat thread` to read"
                " it; if you need the wider channel, run `multica chat history` and open a"
                " specific thread with `multica chat thread <thread_id>`.\n"
            )
        else:
            text += (
                "You were @mentioned at the channel top level: start with `multica chat"
                " history` to see the channel, then read a specific thread's contents with"
                " `multica chat thread <thread_id>`.\n"
            )
        text += (
            "Do these reads SILENTLY as an internal step — they are how you gather context, not"
            " part of your answer.\n"
        )
    elif stores_transcript(channel):
        text += (
            f"The conversation happens in {name}, and Multica stores a transcript of it. The"
            " message below may be only what triggered you — read it back with `multica chat"
            " history` when you need earlier context that is not below.\n"
        )
    else:
        text += (
            f"This conversation and its history live in {name}, NOT in Multica, and Multica has"
            " no history reader for it. Work from the context already provided to you below — no"
            " command can fetch more of this conversation. If you genuinely need earlier context"
            " that is not here, ask the user for it rather than guessing.\n"
        )
    return text + (
        f"Reply to {name} with the final outcome only. Do NOT narrate planned or in-progress"
        ' steps ("我先读取…"); completed actions are part of the outcome.\n\n'
    )


def _selected_skills(task: Task) -> str:
    """The agent's skills the message picked with `/skill` (a `slash://skill/<id>` link), in
    the order picked, each once; picks of skills the agent does not have are ignored."""
    known = {s.id: s.name for s in task.agent.skills}
    if not known:
        return ""
    names: list[str] = []
    seen: set[str] = set()
    for match in _SLASH_SKILL.finditer(task.chat_message):
        skill_id = match.group(2)
        if skill_id in known and skill_id not in seen:
            seen.add(skill_id)
            names.append(known[skill_id])
    if not names:
        return ""
    return "Explicitly selected skills:\n" + "".join(f"- {n}\n" for n in names) + "\n"


def _attachments(files: list[ChatAttachment]) -> str:
    if not files:
        return ""
    lines = []
    for f in files:
        kind = f" content_type={f.content_type}" if f.content_type else ""
        lines.append(f"- id={f.id} filename={quoted(f.filename)}{kind}\n")
    return (
        "\nAttachments on this message:\n"
        + "".join(lines)
        + "Use `multica attachment download <id>` to fetch each file locally before referring"
        " to it.\n"
        "When creating an issue that should preserve one of these attachments, pass"
        " `--attachment-id <id>` to `multica issue create` in addition to keeping the attachment"
        " markdown inline.\n"
    )


def _delivery(task: Task) -> str:
    """How a file the agent makes reaches the reader: a card on the web; in a channel, only
    where the server says this deployment carries it the last hop (never guessed from the
    channel's name), else the agent must describe it in words."""
    channel = task.chat_channel_type
    if not channel:
        return _UPLOAD_WEB
    name = channel_name(channel)
    if task.chat_channel_delivers_files:
        return (
            "\nTo include a file or image you produced in your reply, run `multica attachment"
            f" upload <local-path>`. It binds to your reply and Multica sends it into the {name}"
            " conversation as a separate message right after your text — there is no way to"
            " place it inline, so write your reply to read correctly with the file arriving"
            " after it.\n"
        )
    return (
        f"\nThis reply is delivered to {name} as text. You cannot attach a file to it: `multica"
        " attachment upload` binds to a Multica chat reply, which this is not. If you produce a"
        " file, describe it in words — never write its local path as a link, and never upload"
        " it and then write as though it arrived.\n"
    )


def quoted(text: str) -> str:
    """`text` in double quotes with Go's `%q` escapes, as the file names are listed."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


_SHORT_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}
