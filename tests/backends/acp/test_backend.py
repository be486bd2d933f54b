"""The ACP backend on a small real agent process: permission, bad lines, cancel, the kill."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import pytest

from backends.acp import AcpAgent, AcpBackend
from backends.base import MessageType, RunSpec
from daemon.testing import survivors
from tests.backends.support import RecordingObserver
from tests.fakes.real_cli import tree_of

pytestmark = pytest.mark.anyio

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def backend(log: Path, mode: str) -> AcpBackend:
    agent = AcpAgent(
        name="fake",
        label="Fake",
        command=sys.executable,
        acp_args=(str(FAKE_AGENT), str(log), mode),
        min_version="",
        provider="fake",
    )
    return AcpBackend(agent)


def received(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.parametrize("mode", ["polite", "stubborn"])
async def test_leaving_sends_cancel_then_kills_the_tree(tmp_path: Path, mode: str) -> None:
    """Leaving mid-turn sends session/cancel; an agent that ignores it (and SIGTERM) is
    killed once the cancel wait and the kill grace are over."""
    log, observer = tmp_path / "agent.log", RecordingObserver()
    spec = RunSpec(
        prompt="Go.", workdir=tmp_path, env={"PATH": "/usr/bin:/bin"}, kill_grace=1.0,
        observer=observer,
    )  # fmt: skip
    async with backend(log, mode).start(spec) as run:
        kinds = []
        with anyio.fail_after(30):
            async for message in run.messages():
                kinds.append(message.type)
                if message.type is MessageType.LOG and "chunk" in message.content:
                    break
        tree = tree_of(run.pid)
        left = time.monotonic()
    took = time.monotonic() - left
    assert kinds[:3] == [MessageType.STATUS, MessageType.TOOL_USE, MessageType.TOOL_RESULT]
    assert observer.invalid == 1  # the line that is no JSON, counted and skipped
    methods = [m.get("method") for m in received(log)]
    assert methods[-1] == "session/cancel"
    permission = next(m for m in received(log) if m.get("id") == 99)
    assert permission["result"] == {"outcome": {"outcome": "selected", "optionId": "yes"}}
    assert survivors(tree) == []
    # A quiet machine: 0.5 s polite (it leaves on the cancel), 1.6 s stubborn (the 0.5 s cancel
    # wait, then SIGTERM and the 1 s kill grace); 2.5 s seen at a load of 27. The lower bound
    # holds under any load; the upper one is a safety net against a kill that never comes.
    if mode == "stubborn":
        assert took >= 0.5 + 1.0, took
    assert took < 8.0, took
