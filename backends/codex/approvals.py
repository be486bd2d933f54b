"""What the daemon answers to the requests `codex app-server` makes of its client: at once.

A headless daemon has nobody to ask, and a server waiting for an answer waits forever. The
thread is started with `approvalPolicy: never`, so these come only where something else asks
(an MCP server's elicitation, a tool wanting more permissions, an older CLI):

    item/commandExecution/requestApproval, execCommandApproval     accept
    item/fileChange/requestApproval, applyPatchApproval             accept
    item/permissions/requestApproval    the network and file-system grants asked for, this turn
    mcpServer/elicitation/request       accept, with no content
    anything else                       "method not found" (the turn goes on without it)
"""

from __future__ import annotations

import logging
from typing import Any

from backends.acp import rpc

log = logging.getLogger(__name__)

_ACCEPT = {"decision": "accept"}
_ANSWERS: dict[str, dict[str, Any]] = {
    "item/commandExecution/requestApproval": _ACCEPT,
    "execCommandApproval": _ACCEPT,
    "item/fileChange/requestApproval": _ACCEPT,
    "applyPatchApproval": _ACCEPT,
    "mcpServer/elicitation/request": {"action": "accept", "content": None},
}
_GRANTABLE = ("network", "fileSystem")


def answer_request(frame: rpc.Frame) -> bytes:
    """Our answer line to one request the server made."""
    if frame.method in _ANSWERS:
        return rpc.answer(frame.id, _ANSWERS[frame.method])
    if frame.method == "item/permissions/requestApproval":
        asked = frame.params.get("permissions")
        asked = asked if isinstance(asked, dict) else {}
        granted = {k: asked[k] for k in _GRANTABLE if asked.get(k) is not None}
        if set(asked) - set(_GRANTABLE):
            log.warning("codex: not granting permissions %s", sorted(set(asked) - set(_GRANTABLE)))
        return rpc.answer(frame.id, {"permissions": granted, "scope": "turn"})
    log.warning("codex: refused app-server request %s", frame.method)
    return rpc.refusal(frame.id, rpc.METHOD_NOT_FOUND, f"method not found: {frame.method}")
