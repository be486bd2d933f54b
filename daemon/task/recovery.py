"""Recovery after a watchdog kill: resume the session, start fresh, or give up — and when."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from backends.base import RunSpec

RETRY_BACKOFF = (0.0, 5.0, 15.0)
"""Seconds before retry 1, 2 and 3 after a watchdog kill; later retries wait the last value."""
RESUME_PROMPT = (
    "Your previous turn stopped responding and was interrupted. "
    "Continue the task from where you left off."
)


def next_attempt(
    spec: RunSpec, retries_done: int, retries_allowed: int, session_id: str, tool_calls: int
) -> tuple[RunSpec | None, str]:
    """The spec of the next attempt, or None and why not.

    Resume with a short "continue" prompt when the backend gave a session; start fresh only
    when no tool call ran (no side effects to repeat); otherwise give up at once.
    """
    if retries_done >= retries_allowed:
        return None, ""
    if session_id:
        return replace(spec, prompt=RESUME_PROMPT, resume_session_id=session_id), ""
    if tool_calls == 0:
        return spec, ""
    return None, "tool calls ran and there is no session to resume"


def backoff_delay(backoff: Sequence[float], retries_done: int) -> float:
    """Seconds to wait before the next retry (the last value repeats)."""
    return backoff[min(retries_done, len(backoff) - 1)] if backoff else 0.0
