"""Recovery after a watchdog kill: resume the session, start fresh, or give up — and when."""

from __future__ import annotations

from dataclasses import replace

from backends.base import RunSpec
from daemon.protocol.retry import RetryPolicy

RETRY_BACKOFF = (0.0, 5.0, 15.0)
"""Seconds before retry 1, 2 and 3 after a watchdog kill; later retries wait the last value."""
RESUME_PROMPT = (
    "Your previous turn stopped responding and was interrupted. "
    "Continue the task from where you left off."
)


def idle_retry_policy(retries: int) -> RetryPolicy:
    """`retries` retries after watchdog kills, waiting 0 s, 5 s, then 15 s each, no jitter."""
    return RetryPolicy(RETRY_BACKOFF, max_tries=retries + 1, growth=1.0, jitter=0.0)


def next_attempt(
    spec: RunSpec, policy: RetryPolicy, retries_done: int, session_id: str, tool_calls: int
) -> tuple[RunSpec | None, float, str]:
    """The spec of the next attempt and the wait before it, or None and why not.

    Give up when `policy` allows no more retries. Resume with a short "continue" prompt when
    the backend gave a session; start fresh only when no tool call ran (no side effects to
    repeat); otherwise give up at once.
    """
    delay = policy.delay(retries_done + 1)
    if delay is None:
        return None, 0.0, ""
    if session_id:
        return replace(spec, prompt=RESUME_PROMPT, resume_session_id=session_id), delay, ""
    if tool_calls == 0:
        return spec, delay, ""
    return None, 0.0, "tool calls ran and there is no session to resume"
