"""The `command` backend: any executable that speaks the line protocol (`lineproto` here)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

import anyio

from backends.base import RunSpec
from backends.cli_trust import UntrustedCliError, refusal
from backends.command.lineproto import run_line_agent
from backends.process import ProcessRun


class CommandBackend:
    """Runs one executable per task: prompt on stdin (then closed), messages on stdout."""

    def __init__(
        self,
        path: str,
        args: Sequence[str] = (),
        name: str = "command",
        *,
        search_path: str | None = None,
        strict: bool = False,
    ) -> None:
        """`strict` (a daemon with an agent user): an executable anyone but root could change
        is refused (backends/cli_trust.py)."""
        self.name = name
        self.path = path
        self.args = tuple(args)
        # Where `detect` looks up a bare command name (os.pathsep-separated); None: $PATH.
        self.search_path = search_path
        self._strict = strict

    async def detect(self) -> str | None:
        """The resolved executable path if it exists and is executable; never runs it.

        An arbitrary program may not understand `--version` — or may do real work when
        started — so the path itself stands in for a version. Raises `UntrustedCliError` when
        strict and the executable is not root's alone.
        """
        if self._strict:
            why = await anyio.to_thread.run_sync(self.refusal)
            if why is not None:
                raise UntrustedCliError(why)
        return await anyio.to_thread.run_sync(_resolve, self.path, self.search_path)

    def refusal(self, search_path: str | None = None) -> str | None:
        """Why someone other than root could change the executable, or None (`search_path`:
        the PATH it runs with; default: where `detect` looks)."""
        where = search_path or self.search_path or os.environ.get("PATH", os.defpath)
        return refusal(self.path, where)

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[ProcessRun]:
        """Start the executable in the task's work directory with the agent environment."""
        return run_line_agent([self.path, *self.args, *spec.extra_args], spec, self.name)


def _resolve(path: str, search_path: str | None) -> str | None:
    found = shutil.which(path, path=search_path)
    if found is None:
        return None
    resolved = os.path.realpath(found)
    return resolved if os.path.isfile(resolved) and os.access(resolved, os.X_OK) else None
