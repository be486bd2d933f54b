"""The one kill routine: SIGTERM every group of a tree, a grace, SIGKILL what is left.

Used for a live run when its context ends and for the crash-recovery sweep alike. A group kill
of the agent alone is not enough: Claude Code runs each Bash tool in a shell with its own
session, so `sleep 300` started by a tool sits in another group. The caller therefore hands in
a `collect` coroutine function that finds the whole tree (see `registry`); it is called before
anything is signalled and again after the grace, so anything forked or detached meanwhile is
caught too. The wait is keyed on every collected process being gone — not on the leader — and
every signalled process is first checked to still be the one collected (pid and start time),
so a recycled pid is never hit.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Awaitable, Callable, Iterable

import anyio

from backends.base import RunObserver
from backends.process.tree import ProcIdentity, group_of, is_alive, process_table

log = logging.getLogger(__name__)

SIGKILL_WAIT = 2.0
"""How long to wait for SIGKILLed processes to vanish (a process in uninterruptible sleep)."""

_POLL_FIRST, _POLL_MAX = 0.002, 0.02


def signal_group_of(identity: ProcIdentity, sig: int) -> bool:
    """Signal the process group of a process that is provably still the same one.

    Returns whether a signal was sent. A process in this daemon's own group (or init's) is
    signalled alone, never through its group, so the daemon can never signal itself.
    """
    pgid = group_of(identity)
    if pgid is None or identity.pid in (0, 1, os.getpid()):
        return False
    try:
        if pgid > 1 and pgid != os.getpgrp():
            os.killpg(pgid, sig)
        else:
            os.kill(identity.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def kill_tree(
    collect: Callable[[], Awaitable[list[ProcIdentity]]],
    grace: float,
    observer: RunObserver,
    label: str,
) -> bool:
    """Stop everything `collect` finds still alive; returns whether any signal was sent.

    A tree whose processes have all exited already gets no signal at all.
    """
    members = await collect()
    if not members:
        return False
    log.info("stopping %s: SIGTERM to %d process(es)", label, len(members))
    _signal_groups(members, signal.SIGTERM, observer)
    if grace > 0:
        await _wait_gone(members, grace)
    survivors = {m.pid: m for m in members if is_alive(m)}
    if survivors:
        # Anything forked during the grace hangs below a survivor. Every process on the
        # machine is read, in a worker thread: on the loop it would hold every other run.
        table = await anyio.to_thread.run_sync(process_table)
        for child in table.descendants(list(survivors)):
            survivors.setdefault(child.pid, child)
    if survivors:
        log.warning("stopping %s: SIGKILL to %d survivor(s)", label, len(survivors))
        _signal_groups(survivors.values(), signal.SIGKILL, observer)
    # Processes that left the tree before it was first collected, or during the grace.
    swept = [p for p in await collect() if p.pid not in survivors]
    if swept:
        log.warning("stopping %s: SIGKILL to %d stray(s)", label, len(swept))
        _signal_groups(swept, signal.SIGKILL, observer)
    await _wait_gone([*survivors.values(), *swept], SIGKILL_WAIT)
    return True


def _signal_groups(
    identities: Iterable[ProcIdentity], sig: signal.Signals, observer: RunObserver
) -> None:
    own_group = os.getpgrp()
    done: set[tuple[int, int]] = set()
    for identity in identities:
        pgid = group_of(identity)
        if pgid is None:
            continue
        # Processes in the daemon's own group are signalled one by one, never as a group.
        key = (pgid, identity.pid if pgid == own_group else 0)
        if key in done:
            continue
        if signal_group_of(identity, sig):
            done.add(key)
            observer.signal_sent(sig.name)


async def _wait_gone(identities: Iterable[ProcIdentity], within: float) -> None:
    # Processes that are not our children cannot be awaited; polling /proc is cheap (a few
    # reads per tick) and the backoff keeps the latency of a prompt exit in milliseconds.
    pending = list(identities)
    delay = _POLL_FIRST
    with anyio.move_on_after(within):
        while pending := [p for p in pending if is_alive(p)]:
            await anyio.sleep(delay)
            delay = min(delay * 2, _POLL_MAX)
