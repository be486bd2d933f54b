"""Spawning an agent: its pipes, its lines, its stderr tail, and its tree killed at the end.

`run_process` starts an agent in its own session, feeds its stdin while reading its stdout
(writing a big prompt before reading stdout deadlocks Claude Code), frames stdout into capped,
cleaned lines for a `LineParser`, and keeps a bounded stderr tail.

The run's consumer reads stdout itself: when it has taken every message parsed so far, the
next `__anext__` reads, frames and parses one chunk. A pump task handing each read's messages
to the consumer cost two task switches and an event per read, more than the read and the parse
together: 20 agents printing 10 lines a second spent about 0.1 ms of the daemon's CPU per line
on the hand-off alone. Once the consumer is done (it asks for the result, or the run ends) a
pump reads stdout to its end: the parser needs every line for the result, and an agent that
writes while it exits must never block on a full pipe. Leaving the context — in any
way, including cancellation by the watchdog — kills the agent's whole tree (`kill.kill_tree`
on what the run's `registry` collects).
"""

from __future__ import annotations

import logging
import secrets
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from functools import partial

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from backends.base import LineParser, Message, RunResult, RunStatus
from backends.process.cgroups import RunGroup
from backends.process.held_reads import held_reads
from backends.process.kill import kill_tree
from backends.process.lines import LineFramer, Tail, clean_line
from backends.process.registry import ProcessRegistry
from backends.process.run_group import emptied
from backends.process.spec import ProcessSpec
from backends.process.unit import OUT_OF_MEMORY, Containment, returncode_of

log = logging.getLogger(__name__)

TRACKING_ENV = "AGENT_DAEMON_TASK_ID"
"""Set in every agent's environment to its task id; the kill sweeps processes carrying it."""

_KEPT_UNREAD = 100_000
"""Messages kept once the consumer is done and stdout is read to its end by the pump; past it
the rest are parsed (the result needs them) but not kept."""
_STDIN_QUEUE = 1024
_READ_CHUNK = 256 * 1024


class ProcessRun:
    """A running agent process; implements `backends.base.AgentRun`."""

    def __init__(
        self,
        spec: ProcessSpec,
        parser: LineParser,
        process: Process,
        tag: str,
        registry: ProcessRegistry,
        group: RunGroup | None = None,
    ) -> None:
        self._spec = spec
        self._parser = parser
        self._process = process
        self.tag = tag
        self._registry = registry
        self.leader = registry.spawned(tag, process.pid, spec.cwd)
        self._framer = LineFramer(spec.max_line_bytes)
        self._batch: deque[Message] = deque()
        self._released = anyio.Event()
        """Set once the consumer is done: from then on the pump reads stdout."""
        self._reading = False
        self._read_over: anyio.Event | None = None
        self._stdin_tx: MemoryObjectSendStream[bytes | None]
        self._stdin_rx: MemoryObjectReceiveStream[bytes | None]
        self._stdin_tx, self._stdin_rx = anyio.create_memory_object_stream[bytes | None](
            _STDIN_QUEUE
        )
        self._stderr = Tail(spec.stderr_tail_bytes)
        self._stdout_done = anyio.Event()
        self._stderr_done = anyio.Event()
        self._io_scopes = [anyio.CancelScope(shield=True) for _ in range(3)]
        self._tracking = anyio.CancelScope()
        self._result: RunResult | None = None
        self._held = held_reads(process, spec.read_beat)
        self._group = group
        """The run's cgroups (None: none here): its kill, its limits' counters."""
        self._in_namespace = spec.containment is not None and spec.containment.namespace

    @property
    def pid(self) -> int:
        """The agent leader's pid (also its process group and session id)."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The agent's exit status once reaped (negative: killed by that signal)."""
        return returncode_of(self._process.returncode, self._in_namespace)

    def messages(self) -> AsyncIterator[Message]:
        """Messages parsed from stdout; the iteration ends when stdout closes."""
        return self

    def __aiter__(self) -> ProcessRun:
        return self

    async def __anext__(self) -> Message:
        # The position in the current batch lives here, not in a generator, so a consumer
        # may take a few messages, stop, and resume later without losing any.
        while not self._batch:
            if self._released.is_set():  # the pump reads now: take what it kept
                await self._stdout_done.wait()
                if not self._batch:
                    raise StopAsyncIteration
            elif not await self._read():
                raise StopAsyncIteration
        return self._batch.popleft()

    def pending(self) -> int:
        """Messages read from stdout and parsed but not yet taken by the consumer."""
        return len(self._batch)

    def stderr_tail(self) -> str:
        """The last bytes the agent wrote to stderr, cleaned."""
        return self._stderr.text()

    async def write_line(self, data: bytes) -> None:
        """Queue one line for the agent's stdin (after any earlier input, in order)."""
        await self._stdin_tx.send(data if data.endswith(b"\n") else data + b"\n")

    async def close_stdin(self) -> None:
        """Close the agent's stdin once everything queued before has been written."""
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._stdin_tx.send(None)

    async def result(self) -> RunResult:
        """Wait (bounded) for stdout to close and the process to exit, then build the result.

        The consumer is done then: the pump reads the rest of stdout."""
        self._released.set()
        if self._result is None:
            with anyio.move_on_after(self._spec.result_timeout):
                await self._stdout_done.wait()
                await self._process.wait()
            with anyio.move_on_after(0.5):  # the tail's last bytes may still be in the pipe
                await self._stderr_done.wait()
            result = self._parser.finish(self.returncode, self.stderr_tail())
            self._result = out_of_memory(result, self._group, self._spec.containment)
        return self._result

    async def _guarded(self, scope: anyio.CancelScope, pump: Callable[[], Awaitable[None]]) -> None:
        # Shielded so the pumps keep draining the pipes while the tree is being killed:
        # an agent that handles SIGTERM by writing must not block on a full pipe.
        with scope:
            await pump()

    async def _read(self, keep: bool = True) -> bool:
        """Read one chunk of stdout and parse its lines into the batch (or only parse them);
        False once stdout has closed. While the consumer reads, a chatty agent's read may wait
        for the beat (held_reads.py); the pump, once it is released, reads to the end at once."""
        self._reading = True
        try:  # one reader at a time, to the end of the parse: the parser's state is shared
            if self._held is not None and not self._released.is_set():
                await self._held.before_read()
            return await self._read_chunk(keep)
        finally:
            self._reading = False
            if self._read_over is not None:
                self._read_over.set()

    async def _read_chunk(self, keep: bool) -> bool:
        chunk = await self._receive()
        if chunk is not None and self._held is not None and self._held.left_in_pipe():
            rest = await self._receive()  # at the end, the next read finds it again
            chunk += rest or b""
        if self._held is not None:
            self._held.read(chunk)
        lines = self._framer.feed(chunk) if chunk is not None else []
        if chunk is None and (last := self._framer.flush()) is not None:
            lines.append(last)
        messages = await self._parse_lines(lines)
        if keep:
            self._batch += messages
        if chunk is None:
            if self._framer.cut_lines:
                log.warning("pid %d: %d stdout line(s) cut", self.pid, self._framer.cut_lines)
            self._stdout_done.set()
            return False
        return True

    async def _receive(self) -> bytes | None:
        """The next chunk of stdout; None at its end."""
        stdout = self._process.stdout
        assert stdout is not None
        try:
            return await stdout.receive(_READ_CHUNK)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return None

    async def _pump_stdout(self) -> None:
        """Once the consumer is done, read stdout to its end (keeping a bounded backlog)."""
        await self._released.wait()
        if self._reading:  # the consumer's last read is still under way: one reader at a time
            self._read_over = anyio.Event()
            await self._read_over.wait()
        while not self._stdout_done.is_set():
            await self._read(keep=len(self._batch) < _KEPT_UNREAD)

    async def _parse_lines(self, lines: list[bytes]) -> list[Message]:
        """The messages of one read's lines, their replies queued for stdin in order.

        One call per read, and no await unless a line has a reply: at a few lines a read,
        a coroutine per line was a visible share of the pump."""
        batch: list[Message] = []
        feed, observer = self._parser.feed, self._spec.observer
        for raw in lines:
            try:
                step = feed(clean_line(raw))
            except Exception:  # a parser bug must not end the run; the line is counted as bad
                log.exception("pid %d: parser failed on a line; skipped", self.pid)
                observer.invalid_line()
                continue
            if step.invalid:
                observer.invalid_line()
            if step.replies and self._held is not None:
                self._held.asked = True  # its questions are answered as they come
            for reply in step.replies:
                await self._queue_stdin(reply if reply.endswith(b"\n") else reply + b"\n")
            if step.close_stdin:
                await self._queue_stdin(None)
                if self._held is not None:
                    self._held.end()  # its last line: what follows must not wait a beat
            batch += step.messages
        return batch

    async def _queue_stdin(self, item: bytes | None) -> None:
        try:
            await self._stdin_tx.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("pid %d: stdin already closed; input dropped", self.pid)

    async def _pump_stdin(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            if self._spec.stdin_data:
                await stdin.send(self._spec.stdin_data)
            if self._spec.keep_stdin_open:
                async for item in self._stdin_rx:
                    if item is None:
                        break
                    await stdin.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            log.debug("pid %d: stdin closed by the agent", self.pid)
        finally:
            self._stdin_rx.close()
            await stdin.aclose()

    async def _pump_stderr(self) -> None:
        stderr = self._process.stderr
        assert stderr is not None
        try:
            while True:
                try:
                    self._stderr.add(await stderr.receive(_READ_CHUNK))
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
        finally:
            self._stderr_done.set()
            if self._held is not None:
                self._held.end()  # it exited: its last output must not wait for the beat

    async def _shutdown(self) -> None:
        """Kill the tree, then stop the pumps and close the pipes; always bounded."""
        spec, registry = self._spec, self._registry
        self._tracking.cancel()
        self._released.set()  # nobody consumes any more: the pump drains stdout
        collect = partial(registry.collect, self.pid, TRACKING_ENV)
        with anyio.move_on_after(spec.kill_grace + 3.0):
            await kill_tree(collect, spec.kill_grace, spec.observer, self.tag)
        registry.forget(self.pid)
        if self._group is not None:
            await emptied(self._group, self._spec.observer.limit_reached)
        self._stdin_tx.close()
        with anyio.move_on_after(2.0):
            await self._process.wait()
        with anyio.move_on_after(0.5):  # let the pumps read to EOF so the tail is complete
            await self._stdout_done.wait()
            await self._stderr_done.wait()
        for scope in self._io_scopes:
            scope.cancel()
        self._stdin_rx.close()
        if self._process.returncode is None:
            log.error("pid %d survived SIGKILL; its pipes are left open", self.pid)
            return
        registry.released(self.pid)
        await self._process.aclose()
        reaped = registry.reap()
        if reaped:
            log.debug("reaped adopted orphans %s", reaped)


@asynccontextmanager
async def run_process(spec: ProcessSpec, parser: LineParser) -> AsyncIterator[ProcessRun]:
    """Start the agent; leaving the context kills its whole process tree (bounded)."""
    tag = spec.task_id or f"run-{secrets.token_hex(8)}"
    env = {**spec.env, TRACKING_ENV: tag}
    if spec.user is not None:
        env = spec.user.environ(env)
    containment = spec.containment
    group = containment.group(tag) if containment is not None else None
    if containment is not None:
        argv, switch = containment.wrap(spec.argv, spec.user, group)
    else:
        argv, switch = list(spec.argv), {} if spec.user is None else spec.user.spawn_options()
    try:
        process = await anyio.open_process(
            argv,
            cwd=spec.cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            **switch,
        )
    except BaseException:
        if group is not None:
            group.remove()
        raise
    registry = spec.processes if spec.processes is not None else ProcessRegistry()
    # Registered before any await, so the reaper can never take this agent's exit status.
    run = ProcessRun(spec, parser, process, tag, registry, group)
    log.debug("spawned pid %d for %s (%s)", process.pid, tag, spec.argv[0])
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        pumps = (run._pump_stdout, run._pump_stderr, run._pump_stdin)
        for scope, pump in zip(run._io_scopes, pumps, strict=True):
            tg.start_soon(run._guarded, scope, pump)
        if not run._in_namespace:
            # In a namespace of its own nothing of the run can leave the leader's tree: the
            # kill finds all of it from the leader, with no walk every half second.
            tg.start_soon(run._guarded, run._tracking, run._registry.track)
        try:
            yield run
        except BaseException as exc:
            # Re-raised below, outside the task group, so callers see their own exception
            # rather than an exception group.
            failure = exc
        finally:
            with anyio.CancelScope(shield=True):
                await run._shutdown()
    if failure is not None:
        raise failure


def out_of_memory(
    result: RunResult, group: RunGroup | None, containment: Containment | None
) -> RunResult:
    """A failed run whose cgroup's OOM killer acted fails for that reason, by name."""
    if group is None or containment is None or result.status is not RunStatus.FAILED:
        return result
    if not group.oom_kills():
        return result
    limit = containment.limits.memory_bytes
    said = f"the agent was killed by its memory limit ({limit // (1024 * 1024)} MiB per task)"
    error = f"{said}: {result.error}" if result.error else said
    return replace(result, error=error, failure_reason=OUT_OF_MEMORY)
