"""Bodies of the runtime-level calls besides registration: a heartbeat's answer with the
actions the server hands the runtime (over HTTP, or as the control WebSocket's ack), and the
token renewal's answer."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from daemon.protocol.models import Text, TextList, WireModel

RUNTIME_GONE = "runtime_gone"
"""The status of a heartbeat answer for a runtime the server no longer has."""


def _none_is_empty(value: Any) -> Any:
    # Go sends `null` for an empty slice.
    return [] if value is None else value


class PendingAction(WireModel):
    """A request the server queued for this runtime (model list, skills, ...), by its id."""

    id: str
    target_version: Text = ""
    skill_key: Text = ""


class HeartbeatResponse(WireModel):
    """Answer to a heartbeat, with the pending actions the server hands this runtime."""

    status: Text = ""
    runtime_gone: bool = False
    pending_update: PendingAction | None = None
    pending_model_list: PendingAction | None = None
    pending_local_skills: PendingAction | None = None
    pending_local_skill_import: PendingAction | None = None
    pending_local_skill_imports: Annotated[list[PendingAction], BeforeValidator(_none_is_empty)] = (
        Field(default_factory=list)
    )

    @property
    def gone(self) -> bool:
        """The server deleted the runtime (the socket's twin of a 404 `runtime not found`)."""
        return self.runtime_gone or self.status == RUNTIME_GONE


class HeartbeatAck(HeartbeatResponse):
    """`daemon:heartbeat_ack`: a heartbeat sent over the control WebSocket answered, naming
    its runtime and what the server can do on that connection (`rpc-v1`: requests over it)."""

    runtime_id: Text = ""
    server_capabilities: TextList = Field(default_factory=list)


class RenewResponse(WireModel):
    """Answer to `POST /api/tokens/current/renew`."""

    expires_at: Text = ""
    renewed: bool = False
