"""The tool-aware idle watchdog: stops a run that hangs, never one busy inside a tool call.

It fires only when all of these hold:

* the agent has been silent for at least the window that applies now — the first-output
  budget before any message, the tool budget while a tool call is in flight, else the idle
  window;
* the backend's message queue is empty (the drain loop is not merely behind);
* the agent has not already sent its final result (the exit grace covers that phase).

A first-output budget that passes with only lines the parser does not recognise is its own
verdict (`unrecognised`): the CLI speaks, but not in words this daemon knows, and a retry
would hear the same.

It never touches a process: it cancels the run's scope, and the backend's cleanup kills the
process tree. Time comes from an injected clock and sleep, so tests need no real waiting.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from daemon.config import Settings
from daemon.snapshot import WatchdogSnapshot
from daemon.task.activity import Activity
from daemon.times import format_duration

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class WatchdogPolicy:
    """The windows, in seconds; 0 turns one off. `idle_window == 0` turns off idle and tool."""

    idle_window: float = 1800.0
    tool_window: float = 7200.0
    first_output: float = 120.0

    @classmethod
    def of(cls, settings: Settings, backend: str) -> WatchdogPolicy:
        """The windows configured for one backend's runs."""
        idle = settings.idle_window(backend)
        return cls(idle, settings.tool_watchdog, settings.first_output_timeout)

    def since_last_line(self) -> float:
        """The shortest window counted from the agent's last line (idle, tool); 0: none."""
        if self.idle_window <= 0:
            return 0.0
        return min(w for w in (self.idle_window, self.tool_window) if w > 0)

    @property
    def enabled(self) -> bool:
        """Whether any window can fire."""
        return self.idle_window > 0 or self.first_output > 0

    def tick(self) -> float:
        """How often to check: half the smallest active window, never under 30 s past 1 min."""
        windows = [w for w in (self.idle_window, self.first_output) if w > 0]
        if self.idle_window > 0 and self.tool_window > 0:
            windows.append(self.tool_window)
        return min(_tick_for(w) for w in windows) if windows else 0.0


def _tick_for(window: float) -> float:
    half = window / 2
    return max(half, 30.0) if window >= 60 else half


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why the watchdog fired; the task's attempts turn it into a retry or a report, and an
    incident record."""

    scope: str
    threshold: float
    idle_seconds: float
    tools: tuple[dict[str, object], ...]
    last_type: str
    unrecognised: str = ""
    """The first line the parser did not recognise (scope `unrecognised`)."""

    def describe(self) -> str:
        """The error text reported to the server: names the window and the idle time."""
        idle = format_duration(round(self.idle_seconds, 1))
        window = format_duration(self.threshold)
        if self.scope == "unrecognised":
            return f"no event recognised within {window}"
        if self.scope == "first_output":
            return f"agent produced no first output within {window} (silent for {idle})"
        if self.scope == "tool":
            names = ", ".join(f"{t['name']} ({t['call_id']})" for t in self.tools)
            return (
                f"agent silent for {idle} inside tool call {names}: "
                f"tool watchdog window {window} exceeded"
            )
        return (
            f"agent idle for {idle} with no tool in flight: idle watchdog window {window} exceeded"
        )


def applicable_window(policy: WatchdogPolicy, activity: Activity) -> tuple[str, float]:
    """The scope and window that apply now: `("", 0)` when nothing can fire."""
    if activity.result_at is not None:
        return "", 0.0
    if activity.first_message_at is None and policy.first_output > 0:
        return "first_output", policy.first_output
    if policy.idle_window <= 0:
        return "", 0.0
    if activity.tools:
        return ("tool", policy.tool_window) if policy.tool_window > 0 else ("", 0.0)
    return "idle", policy.idle_window


def verdict_for(policy: WatchdogPolicy, activity: Activity, pending: int) -> Verdict | None:
    """The whole decision, as a pure function of the policy, the activity and the queue."""
    if pending > 0:
        return None
    scope, threshold = applicable_window(policy, activity)
    idle = activity.idle_seconds()
    if not scope or idle < threshold:
        return None
    line = activity.first_unrecognised
    if scope == "first_output" and line:
        scope = "unrecognised"
    return Verdict(scope, threshold, idle, tuple(activity.tools_view()), activity.last_type, line)


class Watchdog:
    """Ticks at window/2 and cancels the run's scope when `verdict_for` says so."""

    def __init__(
        self,
        policy: WatchdogPolicy,
        activity: Activity,
        pending: Callable[[], int],
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self.policy = policy
        self.activity = activity
        self._pending = pending
        self._sleep = sleep
        self.verdict: Verdict | None = None

    def snapshot(self) -> WatchdogSnapshot:
        """The scope and window that apply at this moment, as plain values for operations."""
        return WatchdogSnapshot(*applicable_window(self.policy, self.activity))

    async def watch(self, scope: anyio.CancelScope) -> None:
        """Check every tick until the verdict; then record it and cancel `scope`."""
        tick = self.policy.tick()
        if tick <= 0:
            return
        while True:
            await self._sleep(tick)
            verdict = verdict_for(self.policy, self.activity, self._pending())
            if verdict is not None:
                self.verdict = verdict
                scope.cancel()
                return
