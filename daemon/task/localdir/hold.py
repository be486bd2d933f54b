"""One task run's side of its local directory: found and checked, held (after the tasks that
asked before), and settled once the agent stopped.

While a task waits for its folder the server is told (`wait-local-directory`, with the label
or the folder's name, never its path: the UI shows it to everyone), the run keeps its prepare
lease (it waits inside it) and its status poll runs, so a user's cancel ends the wait; so does
the daemon's shutdown. The folder is let go after the task's report (in place) or right after
its snapshot (worktree).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import anyio

from backends.process.identity import AgentUser
from daemon.errors import ServerError
from daemon.logs import short_id
from daemon.protocol.models import Task
from daemon.protocol.pacing import Beat
from daemon.services import Services
from daemon.task.localdir.placed import LocalPlace
from daemon.task.localdir.resource import LocalDirectory, check_path, find, quoted
from daemon.task.status_poll import poll_status
from daemon.wakeup import Wakeup

log = logging.getLogger(__name__)


class FolderHold:
    """A run's local directory: which one, whether the run holds it, how it was settled."""

    def __init__(self, task_id: str, services: Services, due: Wakeup) -> None:
        """`due` wakes the status poll at once (the server pushed a cancel)."""
        self._task_id = task_id
        self._services = services
        self._due = due
        self._held: Path | None = None
        self._waiting: anyio.CancelScope | None = None
        self._interrupted = False

    async def find(self, task: Task, user: AgentUser | None) -> LocalDirectory | None:
        """The project's local directory on this machine, checked (LocalDirectoryError when
        it cannot be worked in as asked); None when the task has none here."""
        local = find(task, self._services.daemon_id)
        if local is None:
            return None
        local.check_mode()  # before the path: a version skew is fixed elsewhere
        homes = (self._services.reach.base_env.get("HOME", ""), user.home if user else "")
        await anyio.to_thread.run_sync(check_path, local, homes, user)
        mode = "worktree" if local.worktree else "in place"
        log.info("task %s: local directory %s (%s)", short_id(self._task_id), local.path, mode)
        return local

    async def take(
        self, local: LocalDirectory, chat: bool, beat: Beat, stop: Callable[[str], None]
    ) -> bool:
        """Hold the folder, after the tasks that asked before; False when the wait ended
        without it (`stop` heard why). A chat turn in place does not queue and holds nothing:
        its prompt says the folder is shared."""
        if not local.worktree and chat:
            return True
        folders, real, task_id = self._services.folders, local.real, self._task_id
        if folders.try_take(real, task_id):
            self._held = real
            return True
        holder = folders.holder(real)
        reason = local.display_name + (f" (held by task {short_id(holder)})" if holder else "")
        label = short_id(task_id)
        log.info("task %s: waiting for local directory %s: %s", label, local.path, reason)
        client = self._services.client
        try:
            await client.wait_local_directory(task_id, reason)
        except ServerError as exc:
            log.warning("task %s: could not say it waits: %s", label, exc)
        with anyio.CancelScope() as self._waiting:
            if self._interrupted:
                self._waiting.cancel()
            async with anyio.create_task_group() as tg:
                tg.start_soon(poll_status, client, task_id, beat, stop, self._due)
                await folders.take(real, task_id)
                self._held = real
                tg.cancel_scope.cancel()
        self._waiting = None
        log.info(
            "task %s: local directory %s %s",
            label,
            local.path,
            "is free" if self._held else "no longer waited for",
        )
        return self._held is not None

    def interrupt(self) -> None:
        """End a wait for the folder (the run is stopping)."""
        self._interrupted = True
        if self._waiting is not None:
            self._waiting.cancel()

    def release(self) -> None:
        """Let the folder go: the next task waiting for it has it."""
        held, self._held = self._held, None
        if held is not None:
            self._services.folders.release(held, self._task_id)

    async def settle(self, place: LocalPlace | None) -> tuple[str, str, str]:
        """The place settled after the run (place.py): the branch, the durable work dir and
        any error, for the report."""
        if place is None:
            return "", "", ""
        label = short_id(self._task_id)
        try:
            done = await anyio.to_thread.run_sync(place.settle)
        except Exception as exc:
            # The report must still go out: the folder is named, the agent's words are kept.
            log.error("task %s: settling %s failed", label, place.local.path, exc_info=exc)
            return (
                "",
                "",
                f"local_directory: settling {quoted(place.local.display_name)} failed: {exc}",
            )
        if done.error:
            log.error("task %s: %s", label, done.error)
        elif done.branch:
            log.info("task %s: work delivered on branch %s", label, done.branch)
        return done.branch, done.durable_work_dir, done.error
