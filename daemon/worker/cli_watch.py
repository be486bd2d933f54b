"""Agent CLIs that change under the running daemon: an upgrade in place is noticed, its new
version asked for and reported to the server, without a restart.

Multica's daemon re-asks every CLI for `--version` every 10 minutes and registers again each
workspace whose last register carried another version. Here each check costs one `stat` per
CLI (the executable a path resolves to: its inode, size and modification time); only a CLI
whose executable changed is run with `--version`, so checks can be frequent and an upgrade
shows on the server within a minute. A CLI that gives no version keeps the one it had (a
failed probe is no version change) until its executable changes again.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping

import anyio

from backends.agent_cli import AgentCli, Fingerprint
from backends.base import Backend
from backends.cli_trust import UntrustedCliError
from backends.version import version_at_least
from daemon.errors import RoundBoundary
from daemon.worker.registration import Registration

log = logging.getLogger(__name__)


class CliWatch:
    """Looks at each agent CLI's executable every `interval`; a changed one is detected again
    and a new version is written into `backends` (what registering reads) and registered."""

    def __init__(
        self,
        backends: MutableMapping[str, tuple[Backend, str]],
        registration: Registration,
        interval: float,
    ) -> None:
        """`backends` is the daemon's own mapping of backend and version, updated in place."""
        self._backends = backends
        self._registration = registration
        self._interval = interval
        # The executables as detection found them (near enough: taken just after it).
        self._seen: dict[str, Fingerprint | None] = {
            name: _fingerprint(backend) for name, (backend, _) in backends.items()
        }

    async def run(self) -> None:
        """Check every `interval` until cancelled (never with an interval of 0)."""
        if self._interval <= 0:
            return
        boundary = RoundBoundary("agent CLI check")
        while True:
            await anyio.sleep(self._interval)
            with boundary:
                await self.check()

    async def check(self) -> list[str]:
        """One look at every CLI; the names of those whose version changed. Workspaces whose
        registered versions are behind (now, or after a failed register) are registered."""
        changed = [name for name in list(self._backends) if await self._recheck(name)]
        await self._registration.report_versions()
        return changed

    async def _recheck(self, name: str) -> bool:
        backend, version = self._backends[name]
        found = _fingerprint(backend)
        # Gone for now (an upgrade between unlink and link): the next look decides.
        if found is None or found == self._seen.get(name):
            return False
        self._seen[name] = found
        try:
            new = await backend.detect()
        except UntrustedCliError as exc:
            # Nothing was run; the agents' runs refuse it too (daemon/task/attempt.py).
            log.warning(
                "backend %s: executable %s changed and is refused: %s", name, found.path, exc
            )
            return False
        if not new:
            log.warning(
                "backend %s: executable %s changed and gave no version; still %s",
                name,
                found.path,
                version,
            )
            return False
        if new == version:
            log.info("backend %s: executable %s changed, version still %s", name, found.path, new)
            return False
        needed = backend.min_version if isinstance(backend, AgentCli) else ""
        if not version_at_least(new, needed):
            log.warning("backend %s: version %s is older than the %s it needs", name, new, needed)
        log.info(
            "backend %s: version %s -> %s (executable %s changed)", name, version, new, found.path
        )
        self._backends[name] = (backend, new)
        return True


def _fingerprint(backend: Backend) -> Fingerprint | None:
    """An agent CLI's executable now; None for a backend that is no named CLI."""
    return backend.fingerprint() if isinstance(backend, AgentCli) else None
