"""What every backend of a named agent CLI shares: its executable, settings, version, markers."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import anyio.to_thread

from backends.cli_trust import UntrustedCliError, refusal
from backends.process.identity import AgentUser
from backends.version import cli_version


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What tells one install of an executable from the next: the file a path resolves to
    and its inode, size and modification time (an upgrade in place changes at least one)."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int


class AgentCli:
    """An agent CLI run by path with configured arguments and a default model."""

    name = ""
    command = ""
    """The executable looked up on PATH when no path is given ("" = the runtime's `name`)."""
    min_version = ""
    """The oldest version this backend works with ("" = any); checked at detection."""
    tested_max = ""
    """The newest version the project's tests run ("" = no ceiling): above it, a run whose
    events the parser did not all know and that ends with no output fails as unrecognised."""
    session_markers: frozenset[str] = frozenset()
    """Variables a running copy of the CLI sets for its children; never passed on."""
    probe_env: Mapping[str, str] = MappingProxyType({})
    """Variables set for the `--version` probe only (never for a task's run)."""

    def __init__(
        self,
        path: str | None = None,
        args: Sequence[str] = (),
        model: str = "",
        *,
        detect_env: Mapping[str, str] | None = None,
        detect_as: AgentUser | None = None,
    ) -> None:
        """`path` defaults to the CLI's command, looked up on the agent's PATH."""
        path = (self.command or self.name) if path is None else path
        # The CLI runs in the task's work directory: a relative path must not resolve there.
        self.path = os.path.abspath(path) if os.sep in path else path
        self.args = tuple(args)
        self.model = model
        # `detect` runs the CLI with the daemon's own environment unless told otherwise.
        self._detect_env = detect_env
        # The version probe runs the CLI's own code, so it runs as the agents do, and with an
        # agent user only a CLI nobody but root can change is run at all (backends/cli_trust).
        self._detect_as = detect_as
        self.version = ""
        """What the CLI last answered to `--version` ("" before it did)."""

    async def detect(self) -> str | None:
        """`<cli> --version` within 10 s: the version (also kept in `version`), or None.
        Raises `UntrustedCliError` (nothing run) for a CLI an agent user could change."""
        if self.fingerprint() is None:
            # Nothing there to run: no fork. Start-up asks every CLI the daemon knows, and a
            # spawn forks the daemon in its event loop's thread, one after another: sixteen
            # CLIs a machine does not have cost it 20-45 ms before registering.
            return None
        if self._detect_as is not None:
            why = await anyio.to_thread.run_sync(self.refusal)
            if why is not None:
                raise UntrustedCliError(why)
        argv = [self.path, "--version"]
        env = {**self.strip_markers(self._env()), **self.probe_env}
        found = await cli_version(argv, env, user=self._detect_as)
        if found:
            self.version = found
        return found

    def refusal(self, search_path: str | None = None) -> str | None:
        """Why someone other than root could change what runs as this CLI (its file, the
        directories to it, its interpreter), or None; `search_path` is the PATH it is run
        with (default: the probe's)."""
        path = self._env().get("PATH", os.defpath) if search_path is None else search_path
        return refusal(self.path, path)

    def fingerprint(self) -> Fingerprint | None:
        """The executable as it is on disk now, or None when the path finds none: one
        `stat`, cheap enough to ask often (`--version` runs the CLI's code, this does not)."""
        found = shutil.which(self.path, path=self._env().get("PATH", os.defpath))
        if found is None:
            return None
        try:
            # Through every link: an npm upgrade swaps the file a stable link points at.
            real = os.path.realpath(found)
            info = os.stat(real)
        except OSError:
            return None
        return Fingerprint(real, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def _env(self) -> dict[str, str]:
        """The environment the CLI is detected with: the daemon's own unless told otherwise,
        without the daemon's settings (its token among them), which are no business of it."""
        env = os.environ if self._detect_env is None else self._detect_env
        return {k: v for k, v in env.items() if not k.upper().startswith("MULTICA_")}

    def strip_markers(self, env: Mapping[str, str]) -> dict[str, str]:
        """A copy of `env` without this CLI's own session markers."""
        return {k: v for k, v in env.items() if k not in self.session_markers}
