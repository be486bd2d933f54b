"""Agent users handed out per task: one uid per running task, swept clean before its reuse.

With one agent user every task's agent shares a uid: one agent can signal, trace or outlive
into another's processes, and a process that double-forks, calls `setsid` and `chdir /`
leaves its task's process group and outlives it. `MULTICA_AGENT_USER` may therefore name a
pool (`agent1,agent2` or a uid range `2000-2009`): each running task gets a user of its own,
and when its task ends every process of that uid is killed (found by walking /proc, SIGKILL,
until none is left) before the uid is handed out again. The pool bounds concurrency: the
daemon runs at most as many tasks as it has users (config.py clamps
MULTICA_DAEMON_MAX_CONCURRENT_TASKS). A single user is shared by every task and swept
whenever no task of it runs.
"""

from __future__ import annotations

import logging
import math
import os
import re
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import anyio.to_thread

from backends.process.identity import AgentUser
from daemon.boundary.agent_user import VAR, resolve
from daemon.errors import ConfigError

log = logging.getLogger(__name__)

MAX_POOL = 1024
"""Users a pool may name at most: a range past it is a typo, not a plan."""
SWEEP_WITHIN = 10.0
"""Seconds a sweep keeps killing before it gives up and says so."""
HELD_BACK_RETRY = 5.0
"""Seconds between two sweeps of a uid whose processes outlived the last one."""
_RANGE = re.compile(r"(\d+)-(\d+)")
_PROC = Path("/proc")


def resolve_pool(raw: str, euid: int | None = None) -> tuple[AgentUser, ...]:
    """The agent users `raw` names: a name or uid, a comma list of them, or a uid range
    `LOW-HIGH`; () to run agents as the daemon's own user. Raises `ConfigError` naming the
    variable for an unknown user, a bad range or a user named twice."""
    text = raw.strip()
    if not text:
        return ()
    span = _RANGE.fullmatch(text)
    if span is not None:
        low, high = int(span.group(1)), int(span.group(2))
        if high < low or high - low >= MAX_POOL:
            raise ConfigError(
                f"{VAR}={raw!r} is invalid: a uid range runs LOW-HIGH with at most {MAX_POOL} uids"
            )
        entries = [str(uid) for uid in range(low, high + 1)]
    else:
        entries = [part.strip() for part in text.split(",")]
    if len(entries) == 1:
        one = resolve(entries[0], euid)
        return (one,) if one is not None else ()
    users = []
    for entry in entries:
        user = resolve(entry, euid) if entry else None
        if user is None:
            raise ConfigError(
                f"{VAR}={raw!r} is invalid: a pool names other users than the daemon's, each "
                f"once ({entry!r} is not one)"
            )
        users.append(user)
    if len({u.uid for u in users}) != len(users):
        raise ConfigError(f"{VAR}={raw!r} is invalid: a user is named twice")
    return tuple(users)


def processes_of(uid: int, proc: Path = _PROC) -> list[int]:
    """Pids of every process whose real, effective, saved or file-system uid is `uid` and
    that still runs something: a zombie only waits to be reaped, but a process whose leader
    thread exited while another thread runs on reads `Z` too, and lives."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            status = (proc / entry / "status").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if str(uid) not in fields.get("Uid", "").split():
            continue
        if fields.get("State", "").startswith(("Z", "X")) and not threads_live(proc / entry):
            continue
        found.append(int(entry))
    return found


def threads_live(process: Path) -> bool:
    """Whether any thread of a process still runs (its leader may be a zombie already)."""
    try:
        threads = os.listdir(process / "task")
    except OSError:
        return False
    for thread in threads:
        try:
            stat = (process / "task" / thread / "stat").read_text()
        except OSError:
            continue
        state = stat.rpartition(")")[2].split()[:1]
        if state and state[0] not in ("Z", "X"):
            return True
    return False


def sweep(uid: int, within: float = SWEEP_WITHIN) -> int:
    """SIGKILL every process of `uid` until none is left; how many were killed. A process
    forking as fast as it can still runs out: each pass kills every one it saw."""
    if uid in (0, os.geteuid()):  # never the daemon's own: resolve_pool cannot name it
        raise ValueError(f"refusing to sweep uid {uid}, the daemon's own")
    ends = time.monotonic() + within
    killed = 0
    while pids := processes_of(uid):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        if time.monotonic() > ends:
            log.error(
                "uid %d: %d processes still alive after %gs of killing", uid, len(pids), within
            )
            break
        time.sleep(0.005)  # let the kernel deliver the kills before looking again
    if killed:
        log.info("uid %d: killed %d leftover processes", uid, killed)
    return killed


class AgentPool:
    """Hands each task its agent user and sweeps a uid once no task of it runs; a uid whose
    processes outlive the sweep is held back, swept again, and handed out only once clean."""

    def __init__(
        self,
        users: Sequence[AgentUser] = (),
        clean: Callable[[int], int] = sweep,
        alive: Callable[[int], list[int]] = processes_of,
        retry_every: float = HELD_BACK_RETRY,
    ) -> None:
        self.users = tuple(users)
        self._shared = len(self.users) == 1
        self._holders = {u.uid: 0 for u in self.users}
        self._sweeping: set[int] = set()
        self._held_back: dict[int, str] = {}
        """Uids something still runs under after a sweep: why, for `/health`."""
        self._changed = anyio.Event()
        self._clean = clean
        self._alive = alive
        self._retry_every = retry_every

    def held_back(self) -> tuple[str, ...]:
        """Each user no task may have now, and why (for `/health` and `status`)."""
        names = {u.uid: u.name for u in self.users}
        return tuple(f"{names[uid]} (uid {uid}): {why}" for uid, why in self._held_back.items())

    async def acquire(self) -> AgentUser | None:
        """The user the next task runs as (None: agents run as the daemon's user); waits
        while every user of a pool runs a task or is being swept, and while a user's
        processes outlive its sweep (swept again every `retry_every` seconds)."""
        if not self.users:
            return None
        while True:
            for user in self.users:
                if user.uid in self._sweeping or user.uid in self._held_back:
                    continue
                if self._shared or self._holders[user.uid] == 0:
                    self._holders[user.uid] += 1
                    return user
            with anyio.move_on_after(self._retry_every if self._held_back else math.inf):
                await self._changed.wait()
                continue
            for uid in list(self._held_back):
                if uid not in self._sweeping and not self._holders[uid]:
                    await self._sweep(uid)

    async def release(self, user: AgentUser | None) -> None:
        """The task that ran as `user` has ended: once no task runs as it, every process of
        its uid is killed before it is handed out again. Call it shielded."""
        if user is None:
            return
        self._holders[user.uid] -= 1
        if not self._holders[user.uid]:
            await self._sweep(user.uid)

    async def _sweep(self, uid: int) -> None:
        self._sweeping.add(uid)
        try:
            await anyio.to_thread.run_sync(self._clean, uid)
            left = await anyio.to_thread.run_sync(self._alive, uid)
            if left:
                if uid not in self._held_back:
                    log.error(
                        "uid %d: %d process(es) outlived the sweep; no task gets it until "
                        "they are gone",
                        uid,
                        len(left),
                    )
                self._held_back[uid] = f"{len(left)} process(es) outlived the sweep"
            elif self._held_back.pop(uid, None) is not None:
                log.info("uid %d: clean again, handed out once more", uid)
        finally:
            self._sweeping.discard(uid)
            self._changed.set()
            self._changed = anyio.Event()

    def sweep_all(self) -> None:
        """Kill what a previous run of the daemon left behind under every user (at start)."""
        for user in self.users:
            self._clean(user.uid)
