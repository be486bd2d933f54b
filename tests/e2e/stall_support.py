"""What the real-CLI stall tests share: a daemon serving one real CLI under a short idle window,
and a task whose model stalls, stopped as `idle_watchdog` in time with nothing left running."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backends.base import Backend
from daemon.testing import task_processes
from tests.fakes.openai_api import FakeOpenAI
from tests.helpers import RunningDaemon, cli_daemon, incidents

WINDOW = 10.0
"""The idle window: longer than any silence a CLI makes outside a tool. On a quiet machine the
longest is about 1 s (Qwen Code building its request after a tool); a CI machine running six
workers has shown 4.8 s, which a 4 s window stopped as idle."""
TOOL_SECONDS = 16
"""A tool in flight for longer than 1.5 windows: the watchdog has checked at least once while
it ran past the window."""
SLEEP_TOOL = f"sleep {TOOL_SECONDS} && echo slept"
KILL_GRACE = 1.0
# The watchdog fires between 1 and 1.5 windows of silence (shown on a fake clock in
# test_watchdog.py), the kill takes at most the grace: on a quiet machine a stalled task ends
# 10-16 s after its stalled request. Here the bound is only a safety net, 5x that.
STOP_BOUND = 1.5 * WINDOW + KILL_GRACE
SAFETY_NET = 5 * STOP_BOUND
DETACH = "setsid sleep 300 > /dev/null 2>&1 < /dev/null & echo detached"
"""A shell command leaving a process detached into a session of its own."""


def watched_cli(
    home: Path, agent_env: Mapping[str, str], name: str, backend: Backend
) -> AbstractAsyncContextManager[RunningDaemon]:
    """A daemon serving `backend` as `name` under the short idle window.

    The backend is handed in rather than discovered: `--version` of a Node CLI costs seconds
    on a loaded machine."""
    return cli_daemon(
        home,
        agent_env,
        backends={name: (backend, "test")},
        MULTICA_AGENT_IDLE_WATCHDOG=f"{WINDOW:g}s",
        MULTICA_AGENT_KILL_GRACE=f"{KILL_GRACE:g}s",
    )


@dataclass(frozen=True)
class Stalled:
    """A task whose model stalled, once ended."""

    task: dict[str, Any]
    took: float
    """Seconds from the stalled request to the task's end."""
    records: list[dict[str, Any]]
    messages: list[dict[str, Any]]


async def stalled_task(
    d: RunningDaemon, api: FakeOpenAI, backend: str, prompt: str, requests: int
) -> Stalled:
    """Submit `prompt` and wait for its end; the stall is the `requests`-th request the model
    got."""
    task_id = await d.submit(prompt, backend=backend)
    task = await d.wait(task_id, within=120)
    ended_at = time.monotonic()
    calls = api.main_requests()
    assert len(calls) == requests, api.log()
    took = ended_at - (api.started + calls[-1].t)
    return Stalled(task, took, incidents(d), await d.api.messages(task_id))


def assert_stopped_in_time(stalled: Stalled, backend: str) -> None:
    """Stopped as `idle_watchdog`, one idle incident, within the bound, nothing left running."""
    assert stalled.task["failure_reason"] == "idle_watchdog", stalled.task
    (record,) = stalled.records
    assert record["scope"] == "idle"
    print(f"{backend}: {stalled.took:.2f}s from the stalled request to the end of the task")
    assert stalled.took <= SAFETY_NET, stalled.took
    assert task_processes(stalled.task["id"]) == []


def tool_types(stalled: Stalled) -> list[str]:
    """The types of the task's tool messages, in order."""
    return [m["type"] for m in stalled.messages if m["type"].startswith("tool")]
