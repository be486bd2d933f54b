"""Resume-or-fresh runs, on real `sys.executable -c` children standing in for an agent CLI."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus
from backends.process import ProcessSpec, identify
from backends.resume import Launch, fresh_session_message, resume_or_fresh, start_session
from daemon.testing import python, survivors
from tests.backends.support import SLEEPER

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux only"),
]

NOTICE = fresh_session_message("s1", fresh_process=True)


@dataclass
class SessionParser:
    """`missing` on a line means the session is unknown; other lines are text."""

    session_not_found: bool = False

    def feed(self, line: str) -> ParseStep:
        if line == "missing":
            self.session_not_found = True
            return ParseStep()
        return ParseStep(messages=[Message(MessageType.TEXT, content=line)])

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        status = RunStatus.COMPLETED if exit_code == 0 else RunStatus.FAILED
        return RunResult(status, output="finished", exit_code=exit_code)


def launch(tmp_path: Path, code: str) -> Launch:
    spec = ProcessSpec(argv=python(code), cwd=tmp_path, env={"LC_ALL": "C.UTF-8"}, kill_grace=1)
    return spec, SessionParser()


def fresh_of(tmp_path: Path, code: str) -> tuple[list[int], Callable[[], Launch]]:
    """A `fresh` factory and the list that counts how often it was called."""
    calls: list[int] = []

    def fresh() -> Launch:
        calls.append(1)
        return launch(tmp_path, code)

    return calls, fresh


async def test_known_session_runs_only_the_resumed_process(tmp_path: Path) -> None:
    """When the session exists, the resumed process's messages and result are the run's."""
    calls, fresh = fresh_of(tmp_path, "print('fresh')")
    resumed = launch(tmp_path, "print('resumed')")
    async with resume_or_fresh(resumed, fresh, NOTICE) as run:
        with anyio.fail_after(10):
            contents = [m.content async for m in run.messages()]
        result = await run.result()
    assert contents == ["resumed"]
    assert result.status is RunStatus.COMPLETED
    assert calls == []


async def test_missing_session_starts_a_fresh_process_and_says_so(tmp_path: Path) -> None:
    """A missing session is announced, then the fresh process's messages and result follow."""
    calls, fresh = fresh_of(tmp_path, "print('fresh one'); print('fresh two')")
    resumed = launch(tmp_path, "import sys; print('missing'); sys.exit(1)")
    async with resume_or_fresh(resumed, fresh, NOTICE) as run:
        first_pid = run.pid
        with anyio.fail_after(10):
            messages = [m async for m in run.messages()]
        result = await run.result()
        assert run.pid != first_pid
    assert [(m.type, m.content) for m in messages] == [
        (MessageType.STATUS, "Session s1 was not found; started a fresh session instead."),
        (MessageType.TEXT, "fresh one"),
        (MessageType.TEXT, "fresh two"),
    ]
    assert messages[0].fresh_process and not messages[1].fresh_process
    assert messages[0].retired_session == "s1" and not messages[1].retired_session
    assert result.status is RunStatus.COMPLETED and result.exit_code == 0
    assert calls == [1]


async def test_fresh_process_that_cannot_start_fails_the_run(tmp_path: Path) -> None:
    """If the fresh process cannot be spawned, the run fails with a clear error."""

    def fresh() -> Launch:
        spec = ProcessSpec(argv=[str(tmp_path / "no-such-cli")], cwd=tmp_path, env={})
        return spec, SessionParser()

    resumed = launch(tmp_path, "print('missing')")
    async with resume_or_fresh(resumed, fresh, NOTICE) as run:
        with anyio.fail_after(10):
            messages = [m async for m in run.messages()]
        result = await run.result()
    assert [m.type for m in messages] == [MessageType.STATUS]
    assert result.status is RunStatus.FAILED
    assert result.error.startswith("could not start a fresh session:")


async def test_leaving_early_kills_the_fresh_process(tmp_path: Path) -> None:
    """Leaving the context while the fresh process runs kills it."""
    _, fresh = fresh_of(tmp_path, f"print('up', flush=True); {SLEEPER}")
    resumed = launch(tmp_path, "print('missing')")
    async with resume_or_fresh(resumed, fresh, NOTICE) as run:
        stream = aiter(run.messages())
        with anyio.fail_after(10):
            assert (await anext(stream)).type is MessageType.STATUS
            assert (await anext(stream)).content == "up"
        fresh_process = identify(run.pid)
        assert fresh_process is not None
    assert survivors([fresh_process], within=5) == []


async def test_resumed_process_that_cannot_start_raises(tmp_path: Path) -> None:
    """A missing executable for the resumed process raises OSError from `start` itself."""
    _, fresh = fresh_of(tmp_path, "print('fresh')")
    resumed = (
        ProcessSpec(argv=[str(tmp_path / "no-such-cli")], cwd=tmp_path, env={}),
        SessionParser(),
    )
    with pytest.raises(OSError):
        async with resume_or_fresh(resumed, fresh, NOTICE):
            pass


def launcher(tmp_path: Path, codes: dict[str, str]) -> tuple[list[str], Callable[[str], Launch]]:
    """A `launch(resume)` running `codes[resume]`, and the list of what it was asked for."""
    asked: list[str] = []

    def launch_for(resume: str) -> Launch:
        asked.append(resume)
        return launch(tmp_path, codes[resume])

    return asked, launch_for


async def test_no_session_starts_only_a_fresh_process(tmp_path: Path) -> None:
    """Without a session to resume, `start_session` launches once, fresh."""
    asked, launch_for = launcher(tmp_path, {"": "print('fresh')"})
    async with start_session("agent", "", launch_for) as run:
        with anyio.fail_after(10):
            contents = [m.content async for m in run.messages()]
    assert contents == ["fresh"]
    assert asked == [""]


async def test_unknown_session_launches_fresh_after_the_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A session the CLI does not know is resumed first, then launched fresh, and logged once."""
    codes = {"s1": "print('missing')", "": "print('fresh')"}
    asked, launch_for = launcher(tmp_path, codes)
    with caplog.at_level(logging.WARNING, logger="backends.resume"):
        async with start_session("agent", "s1", launch_for) as run:
            with anyio.fail_after(10):
                contents = [m.content async for m in run.messages()]
    assert contents == [NOTICE.content, "fresh"]
    assert asked == ["s1", ""]
    assert [r.getMessage() for r in caplog.records] == [
        "agent: session s1 not found; starting a fresh session"
    ]
