"""A chat turn's prompt: audience, channel, picked skills, attachments, file delivery."""

from __future__ import annotations

from typing import Any

from daemon.protocol.models import Task
from daemon.task.setup.chat_prompt import quoted
from daemon.task.setup.prompt import build_prompt
from daemon.task.setup.runtime_brief import runtime_brief

SKILLS = [{"id": "sk-1", "name": "deploy", "content": "d"}]


def _chat(**fields: Any) -> Task:
    base = {"id": "t", "chat_session_id": "cs", "chat_message": "hi", "agent": {"skills": SKILLS}}
    return Task.model_validate({**base, **fields})


def test_attachments_are_listed_by_id_with_how_to_fetch_them() -> None:
    """Each file by id, quoted name and type; the download command follows."""
    files = [{"id": "a-1", "filename": "shot.png", "content_type": "image/png"}, {"id": "a-2"}]
    text = build_prompt(_chat(chat_message_attachments=files))
    assert (
        '\nAttachments on this message:\n- id=a-1 filename="shot.png" content_type=image/png\n'
        in text
    )
    assert '- id=a-2 filename=""\n' in text
    assert "Use `multica attachment download <id>` to fetch each file locally" in text


def test_a_skill_picked_with_slash_is_named() -> None:
    """A `/skill` link to one of the agent's skills names it; an unknown one is ignored."""
    message = "run [/deploy](slash://skill/sk-1) and [/x](slash://skill/nope)"
    text = build_prompt(_chat(chat_message=message))
    assert "Explicitly selected skills:\n- deploy\n\nUser message:\n" in text


def test_a_group_room_is_not_private() -> None:
    """A group room says unseen members read; an IM room of unknown shape says unknown."""
    assert "Audience: group room; not private;" in build_prompt(
        _chat(chat_channel_type="slack", chat_type="group")
    )
    assert "Audience: unknown.\n" in build_prompt(_chat(chat_channel_type="feishu"))


def test_slack_reads_the_channel_and_a_file_is_described_in_words() -> None:
    """Slack: its history commands, and no upload unless the server says the file arrives."""
    text = build_prompt(_chat(chat_channel_type="slack", chat_in_thread=True))
    assert "start with `multica chat thread` to read it" in text
    assert "This reply is delivered to Slack as text." in text
    delivered = build_prompt(_chat(chat_channel_type="slack", chat_channel_delivers_files=True))
    assert "Multica sends it into the Slack conversation as a separate message" in delivered


def test_the_brief_of_a_channel_chat_defers_files_to_the_turn() -> None:
    """The brief (the cached prefix) does not promise delivery into a channel."""
    assert "Feishu/Lark conversation depends on how this deployment" in runtime_brief(
        _chat(chat_channel_type="feishu")
    )
    assert "attachment card" in runtime_brief(_chat())


def test_file_names_are_quoted_as_go_quotes_them() -> None:
    """Quotes, backslashes and control characters escaped; other letters kept."""
    assert quoted('a "b"\\\né\x01\t') == '"a \\"b\\"\\\\\\né\\x01\\t"'
