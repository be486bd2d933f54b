"""JSON-RPC 2.0 frames as ACP sends them over stdio: one JSON object per line.

A line from the agent is one of three frames: the answer to one of our requests (`id` plus
`result` or `error`), a request of its own (`id` plus `method`: it waits for our answer), or
a notification (`method` without `id`). Anything else is not a frame. `codex app-server` speaks
the same framing: both sessions (acp/session.py, codex/appserver.py) number their requests
with `Calls` and hand each line to what it is with `dispatch`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backends.base import ParseStep
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


def dispatch(
    line: str,
    *,
    answer: Callable[[Frame], ParseStep],
    request: Callable[[Frame], ParseStep],
    notification: Callable[[Frame], ParseStep],
) -> ParseStep:
    """One line from the other side, handed to what it is; a blank line is nothing, a line
    that is no frame is counted invalid."""
    if not line.strip():
        return ParseStep()
    frame = read_frame(line)
    if frame is None:
        return ParseStep(invalid=True)
    handler = {"answer": answer, "request": request}.get(frame.kind, notification)
    return handler(frame)


class Calls:
    """Our requests in flight: each gets the next id, and an answer is matched to the method
    it answers."""

    def __init__(self) -> None:
        self._next_id = 0
        self._pending: dict[int, str] = {}

    def request(self, method: str, params: dict[str, Any], *, wire: str = "") -> bytes:
        """The line of a new request, noted as waiting for its answer; `wire` is the method
        sent when it differs from the one the answer is matched to (two uses of one call)."""
        request_id = self._next_id
        self._next_id += 1
        self._pending[request_id] = method
        return request(request_id, wire or method, params)

    def answered(self, frame: Frame) -> tuple[str, dict[str, Any]]:
        """The method `frame` answers ("" for an id we never sent or already had answered)
        and its result (`{}` unless an object)."""
        method = self._pending.pop(frame.id, "") if isinstance(frame.id, int) else ""
        return method, frame.result if isinstance(frame.result, dict) else {}


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
