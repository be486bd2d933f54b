"""The frames Multica's server sends on the control WebSocket, and who hears each.

The daemon acts on these and ignores any other:

- `{"type": "daemon:task_available", "payload": {"runtime_id", "task_id"}}` wakes the claim loop;
- `{"type": "daemon:workspaces_changed"}`: the account's workspaces changed (`Pushes` syncs);
- `{"type": "daemon:pending_work", "payload": {"runtime_id", "kind"}}`: a heartbeat answer holds
  work a user waits on (`Pushes` sends that runtime's heartbeat now);
- `{"type": "daemon:runtime_profiles_changed", "payload": {"workspace_id", ...}}`: a custom
  runtime profile of that workspace was created, edited, disabled or deleted (`Pushes` reads
  them again). Each time the channel opens, the profiles of every workspace are read again
  too: a change made while it was closed was announced to nobody;
- `{"type": "daemon:heartbeat_ack", "payload": {"runtime_id", "status", "runtime_gone",
  "server_capabilities", "pending_*"...}}`: a heartbeat answered, as the HTTP answer would be
  (`Heartbeats` acts on it; `rpc-v1` among the capabilities lets requests go on this
  connection);
- `{"type": "daemon:rpc_response", "payload": {"request_id", "status", "body", "error"}}`: the
  answer to a request (control_rpc.py).

A frame that does not parse, or an ack or answer of the wrong shape, is logged, counted
(`control_frames_total{outcome="malformed"}`) and dropped; the connection stays up.
"""

from __future__ import annotations

import logging
from typing import Protocol

from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection

from daemon.logs import short_id
from daemon.ops.metrics import Metrics
from daemon.protocol import jsonin
from daemon.protocol.answers import ANSWER_LIMIT
from daemon.protocol.control_rpc import RPC_RESPONSE, RPC_V1, ControlCalls, RpcAnswer
from daemon.protocol.runtime_models import HeartbeatAck
from daemon.wakeup import Wakeup

log = logging.getLogger(__name__)

TASK_AVAILABLE = "daemon:task_available"
WORKSPACES_CHANGED = "daemon:workspaces_changed"
PENDING_WORK = "daemon:pending_work"
PROFILES_CHANGED = "daemon:runtime_profiles_changed"
HEARTBEAT_ACK = "daemon:heartbeat_ack"
FRAME_LIMIT = ANSWER_LIMIT + 64 * 1024
"""Bytes of one frame read: a claim's answer as large as one over HTTP may be (up to 32 tasks
with their instructions, context and skills), in its envelope. Multica's daemon reads up to
64 MiB; its old 64 KiB left a claim the server had made unread, so the task never started."""
_KNOWN = {
    TASK_AVAILABLE,
    WORKSPACES_CHANGED,
    PENDING_WORK,
    PROFILES_CHANGED,
    HEARTBEAT_ACK,
    RPC_RESPONSE,
}
"""The frame types counted by name; any other is counted as `other`."""


class PushHandler(Protocol):
    """What the daemon does with the pushes that are not a task's wake-up."""

    def workspaces_changed(self) -> None:
        """The account's workspaces changed."""

    def pending_work(self, runtime_id: str, kind: str) -> None:
        """A heartbeat answer for `runtime_id` holds work of this kind."""

    def runtime_profiles_changed(self, workspace_id: str) -> None:
        """A custom runtime profile of the workspace changed."""

    def reconnected(self) -> None:
        """The channel (re)opened: what was announced while it was closed is lost."""


class SocketBeats(Protocol):
    """What hears of the heartbeats answered on the socket, and of the socket closing."""

    def acked(self, ack: HeartbeatAck) -> None:
        """A heartbeat sent on the socket was answered."""

    def socket_closed(self, dropped: bool) -> None:
        """The connection closed: `dropped` when it was lost, not reopened for new runtimes."""


class ControlFrames:
    """Hands each frame the server sends to what hears it."""

    def __init__(
        self,
        wakeup: Wakeup,
        calls: ControlCalls,
        pushes: PushHandler | None,
        beats: SocketBeats | None,
        metrics: Metrics | None,
    ) -> None:
        self._wakeup = wakeup
        self._calls = calls
        self._pushes = pushes
        self._beats = beats
        self._metrics = metrics

    def handle(self, frame: str | bytes, ws: ClientConnection) -> None:
        """Act on one frame read on `ws`; one that does not parse is counted and dropped."""
        try:
            message = jsonin.loads(frame, limit=FRAME_LIMIT, what="a control frame")
        except ValueError as exc:
            self._count("other", "malformed")
            log.debug("control channel: frame dropped: %s", exc)
            return
        if not isinstance(message, dict):
            self._count("other", "malformed")
            return
        kind = message.get("type")
        payload = message.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        self._count(kind if isinstance(kind, str) and kind in _KNOWN else "other", "read")
        if kind == HEARTBEAT_ACK:
            self._ack(payload, ws)
        elif kind == RPC_RESPONSE:
            self._answer(payload)
        elif kind == TASK_AVAILABLE:
            log.debug("control channel: task %s available", short_id(str(payload.get("task_id"))))
            self._wakeup.set()
        elif kind == WORKSPACES_CHANGED and self._pushes is not None:
            self._pushes.workspaces_changed()
        elif kind == PENDING_WORK and self._pushes is not None:
            # As Multica's daemon: a payload of the wrong shape, or without a runtime, is dropped.
            runtime_id, work = payload.get("runtime_id"), payload.get("kind", "")
            if isinstance(runtime_id, str) and runtime_id and isinstance(work, str):
                self._pushes.pending_work(runtime_id, work)
        elif kind == PROFILES_CHANGED and self._pushes is not None:
            workspace_id = payload.get("workspace_id")
            if isinstance(workspace_id, str) and workspace_id:
                self._pushes.runtime_profiles_changed(workspace_id)

    def _ack(self, payload: dict[str, object], ws: ClientConnection) -> None:
        try:
            ack = HeartbeatAck.model_validate(payload)
        except ValidationError:
            self._count(HEARTBEAT_ACK, "malformed")
            log.debug("control channel: a heartbeat ack that does not parse, dropped")
            return
        if not ack.runtime_id:
            return
        if RPC_V1 in ack.server_capabilities and not ack.gone:
            self._calls.server_said_rpc_v1(ws)
        if self._beats is not None:
            self._beats.acked(ack)

    def _answer(self, payload: dict[str, object]) -> None:
        request_id, status = payload.get("request_id"), payload.get("status")
        error = payload.get("error") or ""
        if not isinstance(request_id, str) or type(status) is not int or not isinstance(error, str):
            # Left unanswered, the request ends unconfirmed: the safe reading of a broken answer.
            self._count(RPC_RESPONSE, "malformed")
            log.debug("control channel: an rpc answer that does not parse, dropped")
            return
        self._calls.deliver(request_id, RpcAnswer(status, payload.get("body"), error))

    def _count(self, kind: str, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.control_frames.labels(kind.removeprefix("daemon:"), outcome).inc()
