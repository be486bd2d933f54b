"""JSON-RPC 2.0 frames as ACP sends them over stdio: one JSON object per line.

A line from the agent is one of three frames: the answer to one of our requests (`id` plus
`result` or `error`), a request of its own (`id` plus `method`: it waits for our answer), or
a notification (`method` without `id`). Anything else is not a frame.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from backends.json_lines import json_object, str_field

METHOD_NOT_FOUND = -32601


@dataclass(frozen=True, slots=True)
class Frame:
    """One JSON-RPC frame from the agent; `kind` is `answer`, `request` or `notification`."""

    kind: str
    id: Any = None
    method: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: dict[str, Any] | None = None


def read_frame(line: str) -> Frame | None:
    """The frame on `line`, or None when the line is not a JSON-RPC frame."""
    message = json_object(line)
    if message is None:
        return None
    method = message.get("method")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    if "id" in message:
        if isinstance(method, str):
            return Frame("request", id=message["id"], method=method, params=params)
        error = message.get("error")
        if isinstance(error, dict):
            return Frame("answer", id=message["id"], error=error)
        if "result" in message:
            return Frame("answer", id=message["id"], result=message["result"])
        return None
    if isinstance(method, str):
        return Frame("notification", method=method, params=params)
    return None


def request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    """A request line for the agent."""
    return _line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def notification(method: str, params: dict[str, Any]) -> bytes:
    """A notification line for the agent (no answer expected)."""
    return _line({"jsonrpc": "2.0", "method": method, "params": params})


def answer(request_id: Any, result: dict[str, Any]) -> bytes:
    """Our answer to one of the agent's requests."""
    return _line({"jsonrpc": "2.0", "id": request_id, "result": result})


def refusal(request_id: Any, code: int, message: str) -> bytes:
    """An error answer to one of the agent's requests, so it never waits for us."""
    error = {"code": code, "message": message}
    return _line({"jsonrpc": "2.0", "id": request_id, "error": error})


def describe_error(error: dict[str, Any]) -> str:
    """`message (code N): data` of a JSON-RPC error object."""
    text = str_field(error.get("message")) or "error"
    code = error.get("code")
    if isinstance(code, int):
        text += f" (code {code})"
    data = error.get("data")
    if data not in (None, "", {}):
        text += f": {data if isinstance(data, str) else json.dumps(data)}"
    return text


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()
