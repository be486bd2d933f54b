"""The watchdog's decision logic, driven by a fake clock: 30-minute windows in milliseconds."""

from __future__ import annotations

import anyio
import pytest

from backends.base import Message, MessageType
from daemon.task.activity import Activity
from daemon.task.watchdog import Watchdog, WatchdogPolicy, verdict_for
from daemon.testing import FakeClock

MIN = 60.0
POLICY = WatchdogPolicy(idle_window=30 * MIN, tool_window=120 * MIN, first_output=2 * MIN)


def text() -> Message:
    return Message(MessageType.TEXT, content="hi")


def tool_use(call_id: str = "c1") -> Message:
    return Message(MessageType.TOOL_USE, tool="Bash", call_id=call_id, input={"command": "make"})


def tool_result(call_id: str = "c1") -> Message:
    return Message(MessageType.TOOL_RESULT, call_id=call_id, output="ok")


def started(clock: FakeClock) -> Activity:
    activity = Activity(clock)
    activity.observe(text())
    return activity


def test_idle_fires_only_after_the_window() -> None:
    """Silence shorter than the idle window is fine; at the window the verdict is `idle`."""
    clock = FakeClock()
    activity = started(clock)
    clock.advance(30 * MIN - 1)
    assert verdict_for(POLICY, activity, pending=0) is None
    clock.advance(1)
    verdict = verdict_for(POLICY, activity, pending=0)
    assert verdict is not None and verdict.scope == "idle"
    assert verdict.threshold == 30 * MIN and verdict.idle_seconds == 30 * MIN


def test_every_message_resets_idle() -> None:
    """A message just before the window restarts the count."""
    clock = FakeClock()
    activity = started(clock)
    clock.advance(29 * MIN)
    activity.observe(text())
    clock.advance(29 * MIN)
    assert verdict_for(POLICY, activity, pending=0) is None


def test_tool_in_flight_uses_the_tool_window() -> None:
    """Inside a tool call the idle window does not apply; the larger tool window does."""
    clock = FakeClock()
    activity = started(clock)
    activity.observe(tool_use())
    clock.advance(119 * MIN)
    assert verdict_for(POLICY, activity, pending=0) is None
    clock.advance(1 * MIN)
    verdict = verdict_for(POLICY, activity, pending=0)
    assert verdict is not None and verdict.scope == "tool"
    assert verdict.tools[0]["name"] == "Bash" and verdict.tools[0]["call_id"] == "c1"
    assert "tool watchdog window 2h0m0s" in verdict.describe()


def test_tool_window_zero_never_fires_during_a_tool() -> None:
    """`MULTICA_AGENT_TOOL_WATCHDOG=0` means a tool call may run forever."""
    clock = FakeClock()
    activity = started(clock)
    activity.observe(tool_use())
    clock.advance(1000 * MIN)
    policy = WatchdogPolicy(idle_window=30 * MIN, tool_window=0, first_output=2 * MIN)
    assert verdict_for(policy, activity, pending=0) is None


def test_silence_after_a_finished_tool_is_idle() -> None:
    """After tool_use and its tool_result the plain idle window applies again."""
    clock = FakeClock()
    activity = started(clock)
    activity.observe(tool_use())
    activity.observe(tool_result())
    clock.advance(30 * MIN)
    verdict = verdict_for(POLICY, activity, pending=0)
    assert verdict is not None and verdict.scope == "idle"


def test_unmatched_tool_result_changes_nothing() -> None:
    """A result for a call id never seen neither ends another call nor goes negative."""
    clock = FakeClock()
    activity = started(clock)
    activity.observe(tool_use("c1"))
    activity.observe(tool_result("other"))
    assert list(activity.tools) == ["c1"]
    activity.observe(tool_result("c1"))
    activity.observe(tool_result("c1"))
    assert activity.tools == {}


def test_queued_messages_block_the_watchdog() -> None:
    """While the drain is behind (queue not empty) the watchdog never fires."""
    clock = FakeClock()
    activity = started(clock)
    clock.advance(60 * MIN)
    assert verdict_for(POLICY, activity, pending=1) is None
    assert verdict_for(POLICY, activity, pending=0) is not None


def test_zero_idle_window_disables_idle_and_tool() -> None:
    """`MULTICA_AGENT_IDLE_WATCHDOG=0` turns off both the idle and the tool window."""
    clock = FakeClock()
    activity = started(clock)
    policy = WatchdogPolicy(idle_window=0, tool_window=120 * MIN, first_output=0)
    clock.advance(10_000 * MIN)
    assert verdict_for(policy, activity, pending=0) is None
    activity.observe(tool_use())
    clock.advance(10_000 * MIN)
    assert verdict_for(policy, activity, pending=0) is None
    assert not policy.enabled and policy.tick() == 0


def test_first_output_applies_before_any_message() -> None:
    """Before the first message the first-output budget applies, not the idle window."""
    clock = FakeClock()
    activity = Activity(clock)
    clock.advance(2 * MIN)
    verdict = verdict_for(POLICY, activity, pending=0)
    assert verdict is not None and verdict.scope == "first_output"
    assert "no first output" in verdict.describe()


def test_slow_token_after_first_output_is_idle_not_first_output() -> None:
    """Once output started, a slow next message is judged by the idle window only."""
    clock = FakeClock()
    activity = Activity(clock)
    clock.advance(1 * MIN)
    activity.observe(text())
    clock.advance(10 * MIN)
    assert verdict_for(POLICY, activity, pending=0) is None


def test_a_fresh_process_within_the_run_gets_the_first_output_budget_again() -> None:
    """A backend that could not resume starts a fresh CLI in the same run: its start-up is
    judged by the first-output budget, and the old process's tool no longer counts."""
    policy = WatchdogPolicy(idle_window=4.0, tool_window=7200.0, first_output=120.0)
    clock = FakeClock()
    activity = started(clock)
    activity.observe(tool_use())
    notice = Message(MessageType.STATUS, content="started a fresh session", fresh_process=True)
    activity.observe(notice)
    clock.advance(119)
    assert verdict_for(policy, activity, pending=0) is None
    clock.advance(1)
    verdict = verdict_for(policy, activity, pending=0)
    assert verdict is not None and verdict.scope == "first_output" and verdict.tools == ()


def test_after_final_result_the_watchdog_stands_down() -> None:
    """Once the final result arrived, the exit grace (not the watchdog) governs the run."""
    clock = FakeClock()
    activity = started(clock)
    activity.observe(Message(MessageType.RESULT, output="done"))
    clock.advance(100 * MIN)
    assert verdict_for(POLICY, activity, pending=0) is None


@pytest.mark.parametrize(
    ("window", "tick"), [(1.0, 0.5), (40.0, 20.0), (60.0, 30.0), (30 * MIN, 15 * MIN)]
)
def test_tick_is_half_the_window_never_under_30s_past_a_minute(window: float, tick: float) -> None:
    """The tick is window/2, and at least 30 s once the window is a minute or more."""
    assert WatchdogPolicy(idle_window=window, tool_window=0, first_output=0).tick() == tick


@pytest.mark.anyio
async def test_watch_fires_between_window_and_one_and_a_half_windows() -> None:
    """The running watchdog cancels the scope at window…1.5×window of fake time."""
    clock = FakeClock()
    activity = started(clock)
    policy = WatchdogPolicy(idle_window=30 * MIN, tool_window=0, first_output=0)
    watchdog = Watchdog(policy, activity, pending=lambda: 0, sleep=clock.sleep)
    with anyio.CancelScope() as scope:
        await watchdog.watch(scope)
    assert scope.cancel_called
    assert watchdog.verdict is not None
    assert 30 * MIN <= watchdog.verdict.idle_seconds <= 45 * MIN
    assert all(s == 15 * MIN for s in clock.sleeps)


@pytest.mark.anyio
async def test_watch_keeps_quiet_while_messages_arrive() -> None:
    """A message every 20 fake minutes never trips a 30m window, over 100 ticks."""
    clock = FakeClock()
    activity = started(clock)
    policy = WatchdogPolicy(idle_window=30 * MIN, tool_window=0, first_output=0)
    outer = anyio.CancelScope()
    ticks = 0

    async def sleep(seconds: float) -> None:
        nonlocal ticks
        ticks += 1
        for _ in range(int(seconds // MIN)):
            clock.advance(MIN)
            if clock.now % (20 * MIN) == 0:
                activity.observe(text())
        if ticks == 100:
            outer.cancel()
        await anyio.lowlevel.checkpoint()

    watchdog = Watchdog(policy, activity, pending=lambda: 0, sleep=sleep)
    clock.now = 0.0
    activity.restart()
    activity.observe(text())
    with outer, anyio.CancelScope() as scope:
        await watchdog.watch(scope)
    assert ticks == 100
    assert watchdog.verdict is None


def unrecognised(line: str = '{"kind": "chunk"}') -> Message:
    return Message(MessageType.LOG, content="claude event: None", unrecognised=line)


def test_only_unrecognised_lines_meet_the_first_output_budget_as_their_own_verdict() -> None:
    """Lines the parser does not know are no first output: at the budget the verdict is
    `unrecognised`, carrying the first of them."""
    clock = FakeClock()
    activity = Activity(clock)
    activity.observe(unrecognised('{"kind": "open"}'))
    clock.advance(2 * MIN - 1)
    activity.observe(unrecognised('{"kind": "chunk"}'))
    assert verdict_for(POLICY, activity, pending=0) is None
    clock.advance(1)
    verdict = verdict_for(POLICY, activity, pending=0)
    assert verdict is not None and verdict.scope == "unrecognised"
    assert verdict.unrecognised == '{"kind": "open"}'


def test_an_unrecognised_line_after_a_known_one_is_activity() -> None:
    """Once the parser knew the CLI, an unknown event counts as activity, as any other line."""
    clock = FakeClock()
    activity = started(clock)
    clock.advance(29 * MIN)
    activity.observe(unrecognised())
    clock.advance(29 * MIN)
    assert verdict_for(POLICY, activity, pending=0) is None
    assert activity.first_unrecognised == ""


@pytest.mark.parametrize(
    ("idle", "tool", "shortest"), [(1800, 7200, 1800), (1800, 60, 60), (30, 0, 30), (0, 60, 0)]
)
def test_the_shortest_window_counted_from_the_last_line(
    idle: float, tool: float, shortest: float
) -> None:
    """Idle and tool windows count from the agent's last line; an idle window of 0 turns off
    both."""
    assert WatchdogPolicy(idle, tool).since_last_line() == shortest
