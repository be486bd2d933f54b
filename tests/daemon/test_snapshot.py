"""Each object of a run reports on itself: the frozen values operations read."""

from __future__ import annotations

from backends.base import Message, MessageType
from daemon.snapshot import ActivitySnapshot, ToolSnapshot, WatchdogSnapshot
from daemon.task.activity import Activity
from daemon.task.watchdog import Watchdog, WatchdogPolicy

POLICY = WatchdogPolicy(idle_window=1800.0, tool_window=7200.0, first_output=120.0)


class Moment:
    """A clock that stands still until told to move."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_activity_snapshot_shows_the_silence_and_the_tools_in_flight() -> None:
    """The snapshot holds the idle time, each open tool call's age and the message count."""
    clock = Moment()
    activity = Activity(clock)
    activity.observe(Message(MessageType.TOOL_USE, tool="Bash", call_id="c1"))
    clock.now += 7.5
    assert activity.snapshot() == ActivitySnapshot(
        idle_seconds=7.5, tools_in_flight=(ToolSnapshot("Bash", "c1", 7.5),), messages=1
    )


def test_activity_snapshot_is_a_copy_that_does_not_follow_the_activity() -> None:
    """A snapshot taken before a tool finished still shows it: it is a value, not a view."""
    clock = Moment()
    activity = Activity(clock)
    activity.observe(Message(MessageType.TOOL_USE, tool="Bash", call_id="c1"))
    before = activity.snapshot()
    activity.observe(Message(MessageType.TOOL_RESULT, call_id="c1"))
    assert [t.call_id for t in before.tools_in_flight] == ["c1"]
    assert activity.snapshot().tools_in_flight == ()


def test_watchdog_snapshot_names_the_window_that_applies_now() -> None:
    """First output before any message, the tool window inside a tool call, nothing after the
    result."""
    activity = Activity(Moment())
    watchdog = Watchdog(POLICY, activity, pending=lambda: 0)
    assert watchdog.snapshot() == WatchdogSnapshot("first_output", 120.0)
    activity.observe(Message(MessageType.TOOL_USE, tool="Bash", call_id="c1"))
    assert watchdog.snapshot() == WatchdogSnapshot("tool", 7200.0)
    activity.observe(Message(MessageType.RESULT, content="done"))
    assert watchdog.snapshot() == WatchdogSnapshot()
