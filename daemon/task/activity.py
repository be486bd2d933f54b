"""What the drain loop knows about a run: when it last heard from the agent, which tools run."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from backends.base import Message, MessageType
from daemon.snapshot import ActivitySnapshot, ToolSnapshot

# Enum members bound once: attribute access on an Enum class is slow on the drain's hot path.
_TOOL_USE, _TOOL_RESULT, _RESULT = MessageType.TOOL_USE, MessageType.TOOL_RESULT, MessageType.RESULT


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the agent started and has not finished yet."""

    call_id: str
    name: str
    started_at: float
    heartbeat_at: float | None = None
    """When the CLI last said the tool still runs (a heartbeat, not activity)."""


@dataclass(slots=True)
class Activity:
    """Stamped by the drain loop on every message; read by the watchdog and the health port.

    Times are monotonic seconds from the injected clock. A `tool_result` whose call id was never
    seen in a `tool_use` changes nothing, so the in-flight count can never go negative; one
    without an id closes the oldest call that had none. A heartbeat (Claude's `tool_progress`)
    is kept on its tool and stamps nothing: a wedged tool still meets the tool window. A line
    the parser did not recognise stamps nothing either until it has recognised one: a CLI
    whose output changed must meet the first-output budget, not look busy forever. A message
    saying the backend started a fresh process within the run begins the attempt anew.
    """

    clock: Callable[[], float]
    started_at: float = 0.0
    last_activity_at: float = 0.0
    first_message_at: float | None = None
    result_at: float | None = None
    last_type: str = ""
    messages: int = 0
    tool_calls: int = 0
    tools: dict[str, ToolCall] = field(default_factory=dict)
    first_unrecognised: str = ""
    """The first line the parser did not recognise before it recognised any, this attempt."""
    _anonymous: deque[str] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.restart()

    def restart(self) -> None:
        """Begin a new attempt: the agent process was (re)started just now."""
        now = self.clock()
        self.started_at = now
        self.last_activity_at = now
        self.first_message_at = None
        self.result_at = None
        self.first_unrecognised = ""
        self.tools.clear()
        self._anonymous.clear()

    def observe(self, message: Message) -> Message:
        """Stamp activity for one message and keep the in-flight tool set up to date; returns
        the message, a `tool_result` named after its call.

        Every CLI names a tool only on its call, and Multica's transcript pairs a result with
        the oldest open call of the same tool name: a nameless result renders as a row of its
        own and its call without output. The calls in flight are known here, for every backend.
        """
        now = self.clock()
        if message.heartbeat:
            call = self.tools.get(message.call_id)
            if call is not None:
                self.tools[call.call_id] = replace(call, heartbeat_at=now)
            return message
        if message.fresh_process:
            # The old process is gone with its tools; the new one has yet to speak.
            self.restart()
            return message
        if message.unrecognised and self.first_message_at is None:
            self.first_unrecognised = self.first_unrecognised or message.unrecognised
            return message
        self.last_activity_at = now
        if self.first_message_at is None:
            self.first_message_at = now
        kind = message.type
        self.last_type = kind
        self.messages += 1
        if kind is _TOOL_USE:
            self.tool_calls += 1
            call_id = message.call_id
            if not call_id:
                call_id = f"anonymous-{self.tool_calls}"
                self._anonymous.append(call_id)
            self.tools[call_id] = ToolCall(call_id, message.tool, now)
        elif kind is _TOOL_RESULT:
            call_id = message.call_id
            if not call_id:
                # Ids are what pair calls with results; without one, first in, first out.
                while self._anonymous and call_id not in self.tools:
                    call_id = self._anonymous.popleft()
            call = self.tools.pop(call_id, None)
            if call is not None and call.name and not message.tool:
                return replace(message, tool=call.name)
        elif kind is _RESULT:
            self.result_at = now
        return message

    def idle_seconds(self) -> float:
        """Seconds since the last message (or since the start, before the first one)."""
        return max(0.0, self.clock() - self.last_activity_at)

    def snapshot(self) -> ActivitySnapshot:
        """What the agent was last heard doing, as plain values for operations."""
        now = self.clock()
        tools = tuple(
            ToolSnapshot(t.name, t.call_id, round(now - t.started_at, 3))
            for t in list(self.tools.values())
        )
        return ActivitySnapshot(self.idle_seconds(), tools, self.messages)

    def tools_view(self) -> list[dict[str, object]]:
        """The tools in flight, for incident records."""
        now = self.clock()
        return [_tool_view(t, now) for t in self.tools.values()]


def _tool_view(tool: ToolCall, now: float) -> dict[str, object]:
    view: dict[str, object] = {
        "name": tool.name,
        "call_id": tool.call_id,
        "running_for": round(now - tool.started_at, 3),
    }
    if tool.heartbeat_at is not None:
        view["heartbeat_age"] = round(now - tool.heartbeat_at, 3)
    return view
