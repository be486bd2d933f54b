"""What the drain loop records: heartbeats that stamp nothing, and calls without ids cleared."""

from __future__ import annotations

import json
from pathlib import Path

from backends.base import Message, MessageType
from backends.claude.stream import ClaudeStreamParser
from daemon.task.activity import Activity
from daemon.task.watchdog import WatchdogPolicy, verdict_for
from daemon.testing import FakeClock

MIN = 60.0
POLICY = WatchdogPolicy(idle_window=30 * MIN, tool_window=120 * MIN, first_output=2 * MIN)
FIXTURES = Path(__file__).parents[2] / "fixtures" / "claude-stream-json"


def _use(call_id: str = "") -> Message:
    return Message(MessageType.TOOL_USE, tool="Bash", call_id=call_id)


def _result(call_id: str = "") -> Message:
    return Message(MessageType.TOOL_RESULT, call_id=call_id)


def _heartbeat(call_id: str) -> Message:
    return Message(MessageType.LOG, content="Bash still running", call_id=call_id, heartbeat=True)


def test_heartbeats_do_not_hold_off_the_tool_window() -> None:
    """A wedged tool whose CLI says "still running" every 30 s is stopped at the tool window."""
    clock = FakeClock()
    activity = Activity(clock)
    activity.observe(_use("c1"))
    for _ in range(int(120 * MIN / 30)):
        clock.advance(30)
        activity.observe(_heartbeat("c1"))
    verdict = verdict_for(POLICY, activity, pending=0)
    assert verdict is not None and verdict.scope == "tool"
    assert activity.idle_seconds() == 120 * MIN


def test_a_heartbeat_shows_on_its_tool() -> None:
    """The tools view says how long the tool ran and when the CLI last vouched for it."""
    clock = FakeClock()
    activity = Activity(clock)
    activity.observe(_use("c1"))
    clock.advance(30)
    activity.observe(_heartbeat("c1"))
    activity.observe(_heartbeat("unknown"))
    clock.advance(5)
    assert activity.tools_view() == [
        {"name": "Bash", "call_id": "c1", "running_for": 35.0, "heartbeat_age": 5.0}
    ]
    assert activity.messages == 1


def test_results_without_ids_close_the_oldest_anonymous_call() -> None:
    """Two calls without ids, two results without ids: nothing stays in flight."""
    clock = FakeClock()
    activity = Activity(clock)
    activity.observe(_use())
    clock.advance(1)
    activity.observe(_use())
    activity.observe(_use("named"))
    activity.observe(_result())
    assert [t.call_id for t in activity.tools.values()] == ["anonymous-2", "named"]
    activity.observe(_result())
    activity.observe(_result())
    assert list(activity.tools) == ["named"]
    activity.observe(_result("named"))
    assert activity.tools == {}


def test_a_recorded_long_tool_call_stamps_activity_only_for_real_output() -> None:
    """Replaying Claude's 35-second Bash call: the `tool_progress` line leaves the idle clock
    where the tool call set it, and the call is closed by its result."""
    clock = FakeClock()
    activity = Activity(clock)
    parser = ClaudeStreamParser()
    stamps: list[tuple[str, float]] = []
    for line in (FIXTURES / "tool-sleep-35.jsonl").read_text().splitlines():
        clock.advance(10)
        for message in parser.feed(line).messages:
            activity.observe(message)
        stamps.append((json.loads(line)["type"], activity.last_activity_at))
    kinds = [kind for kind, _ in stamps]
    at = kinds.index("tool_progress")
    assert stamps[at][1] == stamps[at - 1][1] < clock.now
    assert activity.tools == {} and activity.tool_calls == 1


def test_a_result_is_named_after_the_call_it_ends() -> None:
    """A result without a tool name leaves observe named after its call, by id, and calls
    without ids first in first out; a result's own name, or one for no known call, is kept."""
    activity = Activity(FakeClock())
    for call in (
        Message(MessageType.TOOL_USE, tool="Bash", call_id="c1"),
        Message(MessageType.TOOL_USE, tool="Read", call_id="c2"),
        Message(MessageType.TOOL_USE, tool="Grep"),
        Message(MessageType.TOOL_USE, tool="Glob"),
    ):
        assert activity.observe(call) == call
    assert activity.observe(_result("c2")).tool == "Read"
    assert activity.observe(_result()).tool == "Grep"
    assert activity.observe(_result("c1")).tool == "Bash"
    assert activity.observe(_result("c1")).tool == ""  # already ended: nothing to name it after
    own = Message(MessageType.TOOL_RESULT, tool="Glob*")
    assert activity.observe(own) == own
    assert activity.tools == {}
