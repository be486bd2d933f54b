"""Claude Code's content blocks and control requests: tool calls and results, progress,
replies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from backends.base import Message, MessageType
from backends.json_lines import str_field


def tool_results(event: Mapping[str, Any]) -> list[Message]:
    """The `tool_result` blocks of a `user` event, as messages."""
    message = event.get("message")
    blocks = message.get("content") if isinstance(message, dict) else None
    if not isinstance(blocks, list):
        return []
    return [
        tool_result(b) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"
    ]


def tool_use(block: Mapping[str, Any]) -> Message:
    """One `tool_use` block; an input that is not an object is kept under `value`."""
    raw = block.get("input")
    return Message(
        MessageType.TOOL_USE,
        tool=str_field(block.get("name")),
        call_id=str_field(block.get("id")),
        input=raw if isinstance(raw, dict) else {"value": raw},
    )


def tool_result(block: Mapping[str, Any]) -> Message:
    """One `tool_result` block; its content flattened to text."""
    return Message(
        MessageType.TOOL_RESULT,
        call_id=str_field(block.get("tool_use_id")),
        output=flatten(block.get("content")),
        is_error=bool(block.get("is_error")),
    )


def progress(event: Mapping[str, Any]) -> Message:
    """A `tool_progress` heartbeat: shown on its tool, never counted as activity."""
    tool = str_field(event.get("tool_name"))
    elapsed = event.get("elapsed_time_seconds")
    return Message(
        MessageType.LOG,
        content=f"{tool or 'tool'} still running ({elapsed}s)",
        tool=tool,
        call_id=str_field(event.get("parent_tool_use_id")) or str_field(event.get("tool_use_id")),
        heartbeat=True,
    )


def control_reply(event: Mapping[str, Any]) -> bytes:
    """Allow every tool the CLI asks about; refuse control requests the daemon has no use for."""
    request_id = str_field(event.get("request_id"))
    request = event.get("request")
    request = request if isinstance(request, dict) else {}
    if request.get("subtype") == "can_use_tool":
        tool_input = request.get("input")
        response: dict[str, Any] = {
            "subtype": "success",
            "request_id": request_id,
            "response": {
                "behavior": "allow",
                "updatedInput": tool_input if isinstance(tool_input, dict) else {},
            },
        }
    else:
        response = {
            "subtype": "error",
            "request_id": request_id,
            "error": f"unsupported control request: {request.get('subtype')}",
        }
    return (json.dumps({"type": "control_response", "response": response}) + "\n").encode()


def flatten(content: Any) -> str:
    """Tool-result content (a string or a list of blocks) as one text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append(str_field(item.get("text")))
            elif isinstance(item, dict):
                parts.append(f"[{item.get('type', 'content')}]")
            else:
                parts.append(str(item))
        return "\n".join(parts)
    return "" if content is None else json.dumps(content)
