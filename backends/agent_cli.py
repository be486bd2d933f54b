"""What every backend of a named agent CLI shares: its executable, settings, version, markers."""

from __future__ import annotations

import copy
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Self

import anyio.to_thread

from backends.cli_args import drop_reserved
from backends.cli_trust import UntrustedCliError, refusal
from backends.models import EMPTY, Catalog
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


def executable_found(path: str) -> bool:
    """Whether an agent CLI built with `path` (and the daemon's own environment) would find
    its executable, told without building it: its backend's module need not be imported."""
    return _which(os.path.abspath(path) if os.sep in path else path, os.environ) is not None


def _which(path: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(path, path=env.get("PATH", os.defpath))


class AgentCli:
    """An agent CLI run by path with configured arguments and a default model."""

    name = ""
    executable = ""
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
    prefix_reserved: Mapping[str, bool] = MappingProxyType({})
    """Flags a launch prefix may not set, each with whether it takes a value: those the
    daemon gives the CLI itself (its protocol, its permissions, its session)."""

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
        path = (self.executable or self.name) if path is None else path
        # The CLI runs in the task's work directory: a relative path must not resolve there.
        self.path = os.path.abspath(path) if os.sep in path else path
        self.args = tuple(args)
        self.prefix: tuple[str, ...] = ()
        """Words between the executable and the daemon's own arguments: a custom runtime
        profile's fixed arguments (`ccms start q36`), part of what the command is."""
        self.model = model
        # `detect` runs the CLI with the daemon's own environment unless told otherwise.
        self._detect_env = detect_env
        # The version probe runs the CLI's own code, so it runs as the agents do, and with an
        # agent user only a CLI nobody but root can change is run at all (backends/cli_trust).
        self._detect_as = detect_as
        self.version = ""
        """What the CLI last answered to `--version` ("" before it did)."""
        self.refused: OSError | None = None
        """Why the system would not start the CLI at its last `--version` (None: it did)."""

    async def detect(self) -> str | None:
        """`<cli> --version` within 10 s: the version (also kept in `version`), or None.
        Raises `UntrustedCliError` (nothing run) for a CLI an agent user could change."""
        self.refused = None
        if self.fingerprint() is None:
            # Nothing there to run: no fork. Start-up asks every CLI the daemon knows, and a
            # spawn forks the daemon in its event loop's thread, one after another: sixteen
            # CLIs a machine does not have cost it 20-45 ms before registering.
            return None
        if self._detect_as is not None:
            why = await anyio.to_thread.run_sync(self.refusal)
            if why is not None:
                raise UntrustedCliError(why)
        refused: list[OSError] = []
        found = await cli_version(
            self.command("--version"),
            self.probe_environment(),
            user=self._detect_as,
            refused=refused,
        )
        self.refused = refused[0] if refused else None
        if found:
            self.version = found
        return found

    def refusal(self, search_path: str | None = None) -> str | None:
        """Why someone other than root could change what runs as this CLI (its file, the
        directories to it, its interpreter), or None; `search_path` is the PATH it is run
        with (default: the probe's)."""
        path = self._env().get("PATH", os.defpath) if search_path is None else search_path
        return refusal(self.path, path)

    async def models(self) -> Catalog:
        """The models the CLI offers, as it reads them (none here: a CLI without a catalog
        of its own takes a model entered by hand)."""
        return EMPTY

    @property
    def probe_user(self) -> AgentUser | None:
        """The user the CLI's probes run as (the agents' user; None: the daemon's own)."""
        return self._detect_as

    def probe_environment(self) -> dict[str, str]:
        """The environment the CLI is asked things in (its version, its models)."""
        return {**self.strip_markers(self._env()), **self.probe_env}

    def command(self, *args: str) -> list[str]:
        """The argv of one invocation: the executable, its launch prefix, then `args`."""
        return [self.path, *self.prefix, *args]

    def for_profile(self, path: str, fixed_args: Sequence[str]) -> Self:
        """This CLI run as a custom runtime profile does: another executable, the profile's
        fixed arguments as its launch prefix (without the flags the daemon owns), the same
        settings otherwise; its version is its own, asked for again."""
        twin = copy.copy(self)
        twin.path = os.path.abspath(path) if os.sep in path else path
        twin.prefix = tuple(self.filter_prefix(fixed_args))
        twin.version = ""
        return twin

    def filter_prefix(self, args: Sequence[str]) -> list[str]:
        """`args` as a launch prefix: every positional word kept (it names the command, as
        `start` in `ccms start q36`), each flag of `prefix_reserved` dropped with its value."""
        reserved = self.prefix_reserved
        with_value = [flag for flag, takes in reserved.items() if takes]
        alone = [flag for flag, takes in reserved.items() if not takes]
        return drop_reserved(args, self.name, with_value, alone)

    def fingerprint(self) -> Fingerprint | None:
        """The executable as it is on disk now, or None when the path finds none: one
        `stat`, cheap enough to ask often (`--version` runs the CLI's code, this does not)."""
        found = self.resolve()
        if found is None:
            return None
        try:
            # Through every link: an npm upgrade swaps the file a stable link points at.
            real = os.path.realpath(found)
            info = os.stat(real)
        except OSError:
            return None
        return Fingerprint(real, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def resolve(self) -> str | None:
        """The executable the path finds on the CLI's PATH (a `which`), or None."""
        return _which(self.path, self._env())

    def _env(self) -> dict[str, str]:
        """The environment the CLI is detected with: the daemon's own unless told otherwise,
        without the daemon's settings (its token among them), which are no business of it."""
        env = os.environ if self._detect_env is None else self._detect_env
        return {k: v for k, v in env.items() if not k.upper().startswith("MULTICA_")}

    def strip_markers(self, env: Mapping[str, str]) -> dict[str, str]:
        """A copy of `env` without this CLI's own session markers."""
        return {k: v for k, v in env.items() if k not in self.session_markers}
