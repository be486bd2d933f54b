"""What the daemon answers to the requests an ACP agent makes of it, at once, every time.

A headless daemon has nobody to ask, and an agent waiting for an answer waits forever (a
permission prompt left open blocks the run until some window kills it). So:

    session/request_permission   the first offered `allow_once`, else `allow_always`, else
                                 `reject_once` (denying that one call, never the turn); with
                                 none of those, an error answer
    anything else                "method not found": the daemon offers no file system, no
                                 terminal, nothing else a client may serve
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from backends.acp import rpc
from backends.json_lines import str_field

log = logging.getLogger(__name__)

_ORDER = ("allow_once", "allow_always", "reject_once")
INTERNAL_ERROR = -32603


@dataclass(frozen=True, slots=True)
class Reply:
    """Our answer line, and the tool call it lets run (None when nothing was granted)."""

    line: bytes
    granted: Mapping[str, Any] | None = None


def answer_request(frame: rpc.Frame, label: str) -> Reply:
    """The answer to one request the agent made."""
    if frame.method != "session/request_permission":
        log.debug("%s: refused agent request %s", label, frame.method)
        message = f"method not found: {frame.method}"
        return Reply(rpc.refusal(frame.id, rpc.METHOD_NOT_FOUND, message))
    choice = choose(frame.params.get("options"))
    if choice is None:
        log.warning("%s: a permission request offered nothing to select", label)
        return Reply(rpc.refusal(frame.id, INTERNAL_ERROR, "no selectable permission option"))
    option, grants = choice
    line = rpc.answer(frame.id, {"outcome": {"outcome": "selected", "optionId": option}})
    tool_call = frame.params.get("toolCall")
    return Reply(line, tool_call if grants and isinstance(tool_call, dict) else None)


def choose(options: Any) -> tuple[str, bool] | None:
    """The option to select and whether it grants: allow once, else always, else reject once."""
    offered = [o for o in options or [] if isinstance(o, dict) and str_field(o.get("optionId"))]
    for kind in _ORDER:
        for option in offered:
            if str_field(option.get("kind")) == kind:
                return str_field(option.get("optionId")), kind != "reject_once"
    return None
