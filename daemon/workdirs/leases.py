"""Which task directories are in use, so the GC never removes one a task runs in.

A task holds its directory from the moment it picks it (a fresh one, or a prior task's it
reuses) until its `.gc_meta.json` is written. The GC reserves a directory for the length of
one removal; a task that wants to reuse a directory the GC holds takes a fresh one instead, and
the GC skips a directory a task holds. Both sides take the one lock only for a set operation,
never across file work.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from daemon.logs import short_id
from daemon.protocol.models import Task
from daemon.workdirs.gc_meta import GC_META, meta_for_task, write_meta

log = logging.getLogger(__name__)


class DirLeases:
    """Task directories held by running tasks, and those the GC is removing right now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: Counter[Path] = Counter()
        self._reclaiming: set[Path] = set()

    def hold(self, env_root: Path) -> bool:
        """Hold a task's directory; False while the GC is removing it (use another)."""
        key = _key(env_root)
        with self._lock:
            if key in self._reclaiming:
                return False
            self._held[key] += 1
            return True

    def release(self, env_root: Path) -> None:
        """A task is done with its directory."""
        key = _key(env_root)
        with self._lock:
            self._held[key] -= 1
            if self._held[key] <= 0:
                del self._held[key]

    def in_use(self, env_root: Path) -> bool:
        """Whether a task holds this directory now."""
        with self._lock:
            return _key(env_root) in self._held

    @contextmanager
    def reclaiming(self, env_root: Path) -> Iterator[bool]:
        """Reserve a directory for removal: yields False (and reserves nothing) when a task
        holds it."""
        key = _key(env_root)
        with self._lock:
            if key in self._held or key in self._reclaiming:
                free = False
            else:
                self._reclaiming.add(key)
                free = True
        try:
            yield free
        finally:
            if free:
                with self._lock:
                    self._reclaiming.discard(key)


def _key(path: Path) -> Path:
    # Absolute, not resolved: the GC and the tasks name directories from the same root.
    return Path(path).absolute()


class TaskLease:
    """One task run's hold on its directory: taken as it is picked, given up once the run has
    said, in `.gc_meta.json`, what the directory belongs to."""

    def __init__(self, leases: DirLeases) -> None:
        self._leases = leases
        self._held: list[Path] = []

    def hold(self, env_root: Path) -> bool:
        """Hold a directory for this run (the `hold` of `prepare_dirs`)."""
        if not self._leases.hold(env_root):
            return False
        self._held.append(env_root)
        return True

    def finish(self, task: Task, env_root: Path | None, *, local_directory: bool = False) -> None:
        """Write the directory's meta (after the report, as Go does: a crash before it leaves
        the directory to the orphan rule), then release everything held. `local_directory`:
        the agent worked in a user's folder in place, and the GC never removes the directory
        whole (Go's mark)."""
        try:
            if env_root is not None:
                meta = replace(meta_for_task(task), local_directory=local_directory)
                write_meta(env_root, meta)
        except OSError as exc:
            log.warning("task %s: cannot write %s: %s", short_id(task.id), GC_META, exc)
        finally:
            while self._held:
                self._leases.release(self._held.pop())
