"""ACP `session/update` notifications as the daemon's messages.

    agent_message_chunk     text: chunks are joined into one message, sent when the agent
                            turns to something else (thinking, a tool, a new message id, the
                            end of the turn); each chunk in between is a `log` message, so a
                            long answer streaming in is activity while the transcript gets
                            one readable message
    agent_thought_chunk     thinking, joined the same way
    tool_call               the call runs — `tool_use` with its id — from its first frame;
    tool_call_update        `completed`/`failed` is its `tool_result`. For an agent whose
                            `pending` means what ACP says (input still streaming in, or
                            awaiting our permission: OpenCode), a pending call is a `log`, and
                            it starts running when the agent says `in_progress`, when we
                            grant its permission, or when it ends before either; others (the
                            Claude adapter) run a call they still call pending. Output
                            arriving while it runs is a heartbeat shown on the tool, never
                            activity: a wedged tool meets the tool window, exactly as a
                            Claude tool call does
    plan                    log with the plan's entries
    user_message_chunk      nothing (the history a loaded session replays)
    anything else           log naming the update

The daemon's watchdog holds off while a `tool_use` has no `tool_result` (daemon/task/activity.py
pairs them by call id), so a tool is "running" from the first of those signals to its end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from backends.base import Message, MessageType
from backends.json_lines import str_field

_RUNNING = frozenset({"in_progress"})
_ENDED = frozenset({"completed", "failed"})
_FLUSH_BYTES = 64 * 1024
_QUIET = frozenset(
    {
        "user_message_chunk",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
    }
)


@dataclass(slots=True)
class _Tool:
    """What the agent told about one tool call so far."""

    title: str = ""
    kind: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    running: bool = False


class SessionUpdates:
    """Turns one session's `session/update` payloads into messages, in order."""

    def __init__(self, *, pending_runs: bool = True) -> None:
        self._pending_runs = pending_runs
        self._tools: dict[str, _Tool] = {}
        self._stream_kind: MessageType | None = None
        self._stream: list[str] = []
        self._stream_bytes = 0
        self._message_id = ""
        self._answer: list[str] = []
        self.texts = 0

    def apply(self, update: Mapping[str, Any]) -> list[Message]:
        """The messages one update yields."""
        kind = str_field(update.get("sessionUpdate"))
        if kind == "agent_message_chunk":
            return self._chunk(MessageType.TEXT, update)
        if kind == "agent_thought_chunk":
            return self._chunk(MessageType.THINKING, update)
        if kind in ("tool_call", "tool_call_update"):
            return [*self.flush(), *self._tool(update, granted=False)]
        if kind == "plan":
            return [*self.flush(), Message(MessageType.LOG, content=_plan(update))]
        if kind in _QUIET:
            return []
        return [Message(MessageType.LOG, content=f"acp update: {kind or '?'}")]

    def granted(self, tool_call: Mapping[str, Any]) -> list[Message]:
        """We allowed the call in a permission request: it runs from now on."""
        return [*self.flush(), *self._tool(tool_call, granted=True)]

    def flush(self) -> list[Message]:
        """The text or thinking joined so far, as one message (nothing if none)."""
        if self._stream_kind is None:
            return []
        kind, text = self._stream_kind, "".join(self._stream)
        self._stream_kind, self._stream, self._stream_bytes = None, [], 0
        if not text:
            return []
        if kind is MessageType.TEXT:
            self._answer.append(text)
            self.texts += 1
        return [Message(kind, content=text)]

    def answer(self) -> str:
        """The agent's text since its last tool call ended: the answer the run reports."""
        return "".join(self._answer)

    def _chunk(self, kind: MessageType, update: Mapping[str, Any]) -> list[Message]:
        content = update.get("content")
        text = str_field(content.get("text")) if isinstance(content, dict) else ""
        message_id = str_field(update.get("messageId"))
        out: list[Message] = []
        if kind is not self._stream_kind or (message_id and message_id != self._message_id):
            out += self.flush()
            self._stream_kind = kind
        self._message_id = message_id or self._message_id
        self._stream.append(text)
        self._stream_bytes += len(text)
        if self._stream_bytes >= _FLUSH_BYTES:
            out += self.flush()
            self._stream_kind = kind
        out.append(Message(MessageType.LOG, content=f"{kind.value} chunk"))
        return out

    def _tool(self, update: Mapping[str, Any], *, granted: bool) -> list[Message]:
        call_id = str_field(update.get("toolCallId"))
        tool = self._tools.setdefault(call_id, _Tool())
        tool.title = str_field(update.get("title")) or tool.title
        tool.kind = str_field(update.get("kind")) or tool.kind
        raw = update.get("rawInput")
        if isinstance(raw, dict) and raw:
            tool.input.update(raw)
        status = str_field(update.get("status"))
        out: list[Message] = []
        starts = granted or self._pending_runs or status in _RUNNING or status in _ENDED
        if not tool.running and starts:
            tool.running = True
            self._answer.clear()
            out.append(_tool_use(call_id, tool))
        if status in _ENDED:
            del self._tools[call_id]
            self._answer.clear()
            out.append(_tool_result(call_id, update, failed=status == "failed"))
        elif not out:
            # Pending (input streaming, permission asked) or output while it runs.
            name = _name(tool)
            if tool.running:
                out.append(Message(MessageType.LOG, tool=name, call_id=call_id, heartbeat=True))
            else:
                out.append(Message(MessageType.LOG, content=f"tool {name} pending", tool=name))
        return out


def _name(tool: _Tool) -> str:
    # ACP names no tool, only a kind (execute, read, edit, ...) and a human title.
    return tool.kind if tool.kind and tool.kind != "other" else tool.title or "tool"


def _tool_use(call_id: str, tool: _Tool) -> Message:
    tool_input = dict(tool.input) if tool.input else {}
    if tool.title and "title" not in tool_input:
        tool_input["title"] = tool.title
    return Message(MessageType.TOOL_USE, tool=_name(tool), call_id=call_id, input=tool_input)


def _tool_result(call_id: str, update: Mapping[str, Any], *, failed: bool) -> Message:
    return Message(
        MessageType.TOOL_RESULT, call_id=call_id, output=tool_output(update), is_error=failed
    )


def tool_output(update: Mapping[str, Any]) -> str:
    """A finished call's output: `rawOutput` (its `output` field when an object), else the
    text of its content blocks."""
    raw = update.get("rawOutput")
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict) and isinstance(raw.get("output"), str):
        return str(raw["output"])
    texts: list[str] = []
    for block in update.get("content") or []:
        if not isinstance(block, dict):
            continue
        inner = block.get("content")
        if isinstance(inner, dict) and isinstance(inner.get("text"), str):
            texts.append(str(inner["text"]))
        elif block.get("type") == "diff":
            texts.append(f"edited {str_field(block.get('path'))}")
    if texts:
        return "\n".join(texts)
    return json.dumps(raw) if raw is not None else ""


def _plan(update: Mapping[str, Any]) -> str:
    lines = []
    for entry in update.get("entries") or []:
        if isinstance(entry, dict):
            mark = "[x] " if entry.get("status") == "completed" else "[ ] "
            lines.append(mark + str_field(entry.get("content")))
    return "plan:\n" + "\n".join(lines)
