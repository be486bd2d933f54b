"""Pinning the agent's session on the task as soon as the agent names it.

Multica resumes a task from the session and work directory its row holds. The terminal report
writes them, but a daemon that crashes mid-run never sends one: the server's retry of the
orphaned task then has nothing to resume and starts the work over in a new directory. So, as
Multica's daemon does, the first time a run hears a session id (Claude's `system/init`, Codex's
thread, an ACP `session/new`), it posts `POST /api/daemon/tasks/{id}/session` with
`{session_id, work_dir}` in the background: never in the drain loop's way, one try bounded by
5 s, a failure logged and otherwise ignored (the terminal report still carries both).

Codex names its thread before its rollout file exists, and a thread without one cannot be
resumed; its pin waits for the file (for as long as the run lasts, one last look when it ends)
so a crash never leaves the server a session that a retry would fail to resume.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
from anyio.abc import TaskGroup

from backends.base import RunSpec
from backends.codex.backend import codex_home
from backends.codex.rollouts import rollout_present
from daemon.errors import ServerError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer

log = logging.getLogger(__name__)

PIN_WITHIN = 5.0
"""Seconds one pin may take (Multica's bound)."""
ROLLOUT_POLL = 0.05
"""How soon a Codex pin looks for the thread's rollout file again (Multica's interval) ..."""
ROLLOUT_POLL_CAP = 1.0
"""... doubling up to this: a thread whose rollout never comes is not searched for 20 times a
second for the whole run."""
ROLLOUT_FLUSH_WAIT = 2.0
"""Seconds a finished run's Codex thread gets to reach the disk before the report withholds
it (Multica's bound): the file is normally there long before."""


async def arrives(check: Callable[[str], bool], session_id: str, within: float) -> bool:
    """Whether `session_id` passes `check` now or within `within` seconds (polled: the file is
    the CLI's own, outside this event loop)."""
    deadline = anyio.current_time() + within
    while True:
        if await anyio.to_thread.run_sync(check, session_id):
            return True
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(ROLLOUT_POLL)


def resumable_check(backend: str, spec: RunSpec) -> Callable[[str], bool] | None:
    """What a session must pass before it is pinned: Codex's rollout file; None: nothing."""
    if backend != "codex":
        return None
    home = codex_home(spec.env)
    reader = spec.user.owner if spec.user else None
    # The agent's tree: no link in it followed, its user's sessions reached from our side.
    return lambda thread: rollout_present(home, thread, reader, spec.codex_sessions)


class SessionPin:
    """Pins each new session a run's agent names, once, in `tg`; `run_ended` stops the waits."""

    def __init__(
        self,
        client: TaskServer,
        task_id: str,
        work_dir: str,
        tg: TaskGroup,
        resumable: Callable[[str], bool] | None = None,
        *,
        within: float = PIN_WITHIN,
    ) -> None:
        self._within = within
        self._client = client
        self._task_id = task_id
        self._work_dir = work_dir
        self._tg = tg
        self._resumable = resumable
        self._pinned = ""
        self._ended = anyio.Event()
        self.id = short_id(task_id)

    def learned(self, session_id: str) -> None:
        """The agent named its session: pin it, unless it is the one pinned already."""
        if not session_id or session_id == self._pinned:
            return
        self._pinned = session_id
        self._tg.start_soon(self._pin, session_id)

    def run_ended(self) -> None:
        """The agent is done: a pin still waiting for its rollout takes a last look and stops."""
        self._ended.set()

    async def _pin(self, session_id: str) -> None:
        check = self._resumable
        if check is not None and not await self._wait_resumable(check, session_id):
            log.debug("task %s: session %s not pinned: no rollout", self.id, session_id)
            return
        with anyio.move_on_after(self._within) as bounded:
            try:
                await self._client.pin_session(self._task_id, session_id, self._work_dir)
            except ServerError as exc:
                log.warning("task %s: pinning session %s failed: %s", self.id, session_id, exc)
                return
        if bounded.cancelled_caught:
            log.warning(
                "task %s: pinning session %s took over %ss", self.id, session_id, self._within
            )
            return
        log.info("task %s: session %s pinned", self.id, session_id)

    async def _wait_resumable(self, check: Callable[[str], bool], session_id: str) -> bool:
        # The rollout is the CLI's own file, outside this event loop: polled, as Multica does.
        pause = ROLLOUT_POLL
        while not await anyio.to_thread.run_sync(check, session_id):
            if self._ended.is_set():
                return bool(await anyio.to_thread.run_sync(check, session_id))
            with anyio.move_on_after(pause):
                await self._ended.wait()
            pause = min(pause * 2, ROLLOUT_POLL_CAP)
        return True
