"""Ending an agent's process tree: SIGTERM every group, a grace, SIGKILL, then a sweep by tag.

A group kill of the agent alone is not enough: Claude Code runs each Bash tool in a shell with
its own session, so `sleep 300` started by a tool sits in another group and, once the CLI dies,
is reparented to PID 1. The tree is therefore collected from /proc before anything is
signalled (the leader, its descendants by parent link, and every process carrying the run's
tracking tag), each distinct group is signalled, and the wait is keyed on every collected
process being gone — not on the leader. Every signalled process is first checked to still be
the one collected (pid and start time), so a recycled pid is never hit.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterable

import anyio

from backends.base import RunObserver
from backends.proctree import (
    ProcIdentity,
    descendants,
    group_of,
    is_alive,
    signal_group_of,
    tagged,
)

log = logging.getLogger(__name__)

SIGKILL_WAIT = 2.0
"""How long to wait for SIGKILLed processes to vanish (a process in uninterruptible sleep)."""

_POLL_FIRST, _POLL_MAX = 0.002, 0.02


async def kill_tree(
    leader: ProcIdentity | None,
    tag_var: str,
    tag_value: str,
    grace: float,
    observer: RunObserver,
) -> bool:
    """Stop everything of the tree still alive; returns whether any signal was sent.

    A tree whose processes have all exited already gets no signal at all.
    """
    members = collect_tree(leader, tag_var, tag_value)
    if not members:
        return False
    log.info("stopping %s: SIGTERM to %d process(es)", tag_value, len(members))
    _signal_groups(members, signal.SIGTERM, observer)
    if grace > 0:
        await _wait_gone(members, grace)
    survivors = {m.pid: m for m in members if is_alive(m)}
    for survivor in list(survivors.values()):
        # Anything forked during the grace hangs below a survivor.
        for child in descendants(survivor.pid):
            survivors.setdefault(child.pid, child)
    if survivors:
        log.warning("stopping %s: SIGKILL to %d survivor(s)", tag_value, len(survivors))
        _signal_groups(survivors.values(), signal.SIGKILL, observer)
    # Descendants that left the tree before it was collected still carry the tag.
    swept = [p for p in tagged(tag_var, tag_value) if p.pid not in survivors]
    if swept:
        log.warning("stopping %s: SIGKILL to %d tagged stray(s)", tag_value, len(swept))
        _signal_groups(swept, signal.SIGKILL, observer)
    await _wait_gone([*survivors.values(), *swept], SIGKILL_WAIT)
    return True


def collect_tree(leader: ProcIdentity | None, tag_var: str, tag_value: str) -> list[ProcIdentity]:
    """The live processes of a run: the leader, its descendants, and every tagged process."""
    found: dict[int, ProcIdentity] = {}
    if leader is not None and is_alive(leader):
        below = descendants(leader.pid)
        # Only trust the walk if the leader was the same process throughout it.
        if is_alive(leader):
            found[leader.pid] = leader
            found.update((d.pid, d) for d in below)
    for identity in tagged(tag_var, tag_value):
        found.setdefault(identity.pid, identity)
    return list(found.values())


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
