"""Waits that name their event: a state reached, a port answering, a child process gone.

A test that sleeps a fixed time guesses how long the machine takes; on a busy machine the
guess is wrong and the test fails for the machine's sake. These wait for the event itself, and
their timeout is only a safety net: when it runs out the error says which event never came.

    await wait_for(lambda: run.state == "running", what="the run to start")
    await port_answers(port, what="the health port")
    code = await stopped(child)          # TERM unless it is already gone, then its exit code
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import Process

EVERY = 0.02
"""How often a polled predicate is asked again (seconds)."""


class WaitTimeout(AssertionError):
    """The awaited event did not happen within the safety net; the message names it."""


async def wait_for(
    predicate: Callable[[], bool | Awaitable[bool]],
    *,
    what: str,
    within: float = 10.0,
    every: float = EVERY,
) -> None:
    """Return as soon as `predicate()` (sync or async) holds; raise `WaitTimeout` naming
    `what` after `within` seconds, which must be a safety net, never the behaviour tested."""
    started = time.monotonic()
    with anyio.move_on_after(within):
        while True:
            # Polling on purpose: the state often lives outside this event loop (/proc, a
            # child process, a file, another thread).
            held = predicate()
            if held if isinstance(held, bool) else await held:
                return
            await anyio.sleep(every)
    raise WaitTimeout(
        f"timed out after {time.monotonic() - started:.1f}s waiting for {what} "
        f"(the safety net is {within}s)"
    )


def wait_until(
    predicate: Callable[[], bool], *, what: str, within: float = 10.0, every: float = EVERY
) -> None:
    """`wait_for` for a test outside an event loop (or in a worker thread)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {within}s waiting for {what}")
        time.sleep(every)


async def port_answers(
    port: int, *, host: str = "127.0.0.1", what: str = "", within: float = 10.0
) -> None:
    """Wait until `host:port` accepts a TCP connection (then close it)."""

    async def accepts() -> bool:
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError:
            return False
        await stream.aclose()
        return True

    await wait_for(accepts, what=what or f"{host}:{port} to accept a connection", within=within)


async def stopped(process: Process, *, within: float = 10.0) -> int:
    """End `process` and return its exit code: SIGTERM unless it has already exited (a child
    that died on its own is no error here: the caller asserts on the code), SIGKILL when it
    outlives `within`. Always reaped, so the test never leaves it behind."""
    if process.returncode is None:
        # Exited but not yet reaped: asyncio refuses the signal with ProcessLookupError.
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
    with anyio.CancelScope(shield=True):
        with anyio.move_on_after(within):
            await process.wait()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        code = await process.wait()
    return code
