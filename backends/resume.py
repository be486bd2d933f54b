"""Resume a session, or — when the CLI no longer knows it — start a fresh one in the same run.

The daemon resumes with whatever session id it last saw, which may be gone (another machine,
a wiped home directory, a different CLI). The backend handles that itself: the resumed process
is started first; if its parser reports the session missing, a fresh process is started in
the same `AgentRun`, and the transcript says so with a status message. The daemon only sees
one stream of messages and one result.

A backend states the rule once, with `start_session(agent, session, launch)`: `launch(resume)`
builds the process and parser that resume `resume`, or start fresh when it is "".
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Protocol

import anyio

from backends.base import AgentRun, LineParser, Message, MessageType, RunResult, RunStatus
from backends.process import ProcessRun, ProcessSpec, run_process


class ResumableParser(LineParser, Protocol):
    """A parser that can tell the CLI refused to resume because the session is unknown."""

    session_not_found: bool


Launch = tuple[ProcessSpec, ResumableParser]

log = logging.getLogger(__name__)


class FallbackRun:
    """An `AgentRun` over the resumed process and, if needed, the fresh one after it."""

    def __init__(self, first: ProcessRun, parser: ResumableParser) -> None:
        self._current = first
        self._first_parser = parser
        self._tx, self._rx = anyio.create_memory_object_stream[Message](0)
        self._result: RunResult | None = None
        self._done = anyio.Event()

    @property
    def pid(self) -> int:
        """The pid of the process running now (the fresh one after a fallback)."""
        return self._current.pid

    def messages(self) -> AsyncIterator[Message]:
        """Messages of the resumed process, then of the fresh one if it had to start."""
        return self._rx

    def pending(self) -> int:
        """Messages parsed and not yet taken, including one held by the forwarder."""
        stats = self._tx.statistics()
        return self._current.pending() + stats.current_buffer_used + stats.tasks_waiting_send

    async def close_stdin(self) -> None:
        """Close the running process's stdin."""
        await self._current.close_stdin()

    async def result(self) -> RunResult:
        """The result of the process that ran last (bounded; call after `messages`)."""
        with anyio.move_on_after(10):
            await self._done.wait()
        if self._result is None:
            return RunResult(RunStatus.FAILED, error="the agent's result never arrived")
        return self._result

    def close(self) -> None:
        """Release the message stream (the consumer is done with it)."""
        self._rx.close()

    async def forward(self, fresh: Callable[[], Launch], notice: Message) -> None:
        """Pump messages; on a missing session, start `fresh()` and pump its messages too."""
        try:
            async with self._tx:
                result = await self._pump(self._current)
                if self._first_parser.session_not_found:
                    result = await self._fall_back(fresh, notice)
                self._result = result
        finally:
            self._done.set()

    async def _fall_back(self, fresh: Callable[[], Launch], notice: Message) -> RunResult:
        await self._tx.send(notice)
        spec, parser = fresh()
        try:
            async with run_process(spec, parser) as run:
                self._current = run
                return await self._pump(run)
        except OSError as exc:
            return RunResult(RunStatus.FAILED, error=f"could not start a fresh session: {exc}")

    async def _pump(self, run: ProcessRun) -> RunResult:
        async for message in run.messages():
            await self._tx.send(message)
        return await run.result()


@asynccontextmanager
async def resume_or_fresh(
    resumed: Launch, fresh: Callable[[], Launch], notice: Message
) -> AsyncIterator[AgentRun]:
    """Start `resumed`; fall back to `fresh()` inside the same run if the session is unknown."""
    spec, parser = resumed
    failure: BaseException | None = None
    # The resumed process lives in this task, so a failure to spawn it raises from here
    # (an OSError the daemon reports) rather than from inside the task group.
    async with run_process(spec, parser) as first:
        run = FallbackRun(first, parser)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run.forward, fresh, notice)
                try:
                    yield run
                except BaseException as exc:
                    failure = exc
                finally:
                    # The consumer left: stop forwarding; leaving run_process kills the trees.
                    tg.cancel_scope.cancel()
        finally:
            run.close()
    if failure is not None:
        raise failure


@asynccontextmanager
async def start_session(
    agent: str, session: str, launch: Callable[[str], Launch]
) -> AsyncIterator[AgentRun]:
    """Run `launch(session)`; with no session, or one the CLI does not know, `launch("")`."""
    if not session:
        spec, parser = launch("")
        async with run_process(spec, parser) as run:
            yield run
        return

    def fresh() -> Launch:
        log.warning("%s: session %s not found; starting a fresh session", agent, session)
        return launch("")

    notice = fresh_session_message(session, fresh_process=True)
    async with resume_or_fresh(launch(session), fresh, notice) as either:
        yield either


def fresh_session_notice(session: str) -> str:
    """What the transcript says when the session to resume was not found."""
    return f"Session {session} was not found; started a fresh session instead."


def fresh_session_message(session: str, text: str = "", *, fresh_process: bool = False) -> Message:
    """The transcript's status message for a session the agent could not resume, naming it
    as retired; `fresh_process`: a new agent process carries on."""
    return Message(
        MessageType.STATUS,
        content=text or fresh_session_notice(session),
        fresh_process=fresh_process,
        retired_session=session,
    )
