"""What every backend of a named agent CLI shares: its executable, settings, version, markers."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from backends.process.identity import AgentUser
from backends.version import cli_version


class AgentCli:
    """An agent CLI run by path with configured arguments and a default model."""

    name = ""
    min_version = ""
    """The oldest version this backend works with ("" = any); checked at detection."""
    session_markers: frozenset[str] = frozenset()
    """Variables a running copy of the CLI sets for its children; never passed on."""

    def __init__(
        self,
        path: str | None = None,
        args: Sequence[str] = (),
        model: str = "",
        *,
        detect_env: Mapping[str, str] | None = None,
        detect_as: AgentUser | None = None,
    ) -> None:
        """`path` defaults to the CLI's name, looked up on the agent's PATH."""
        path = self.name if path is None else path
        # The CLI runs in the task's work directory: a relative path must not resolve there.
        self.path = os.path.abspath(path) if os.sep in path else path
        self.args = tuple(args)
        self.model = model
        # `detect` runs the CLI with the daemon's own environment unless told otherwise.
        self._detect_env = detect_env
        # The version probe runs the CLI's own code, so it runs as the agents do: an agent
        # user's CLI (one it may have replaced) never runs as root.
        self._detect_as = detect_as

    async def detect(self) -> str | None:
        """`<cli> --version` within 10 s: the version, or None."""
        env = dict(os.environ) if self._detect_env is None else dict(self._detect_env)
        # The daemon's own settings (its token among them) are no business of the CLI's.
        env = {k: v for k, v in env.items() if not k.upper().startswith("MULTICA_")}
        argv = [self.path, "--version"]
        return await cli_version(argv, self.strip_markers(env), user=self._detect_as)

    def strip_markers(self, env: Mapping[str, str]) -> dict[str, str]:
        """A copy of `env` without this CLI's own session markers."""
        return {k: v for k, v in env.items() if k not in self.session_markers}
