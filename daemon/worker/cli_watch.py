"""Agent CLIs that change under the running daemon: an upgrade in place, a CLI installed after
the start, one that became unusable — each reaches the server without a restart.

Multica's daemon looks for new CLIs every 2 minutes, asks every CLI for `--version` again
every 10, and takes a CLI's runtimes offline once it is confirmed unusable. Here each check
(every `interval`, a minute by default) costs one `stat` per CLI found and one PATH lookup per
CLI not found (the executable a path resolves to: its inode, size and modification time);
only a CLI whose executable changed is run with `--version`, so checks can be frequent:

- a CLI found whose version changed: the new version is registered (same runtimes);
- a CLI not found before whose executable appeared (or changed since it last failed its
  probe): detected as at start-up, and registered in every workspace when it passes;
- a CLI found that is unusable now is dropped, its runtimes taken offline with the reason
  (`unusable.py`): its path finds no executable on two checks in a row (the first may be an
  upgrade between unlink and link), the system refuses to start it on two probes in a row
  (the first may be an installer halfway), or it answers with a version below the
  backend's minimum. A CLI whose task is running keeps its runtimes until the task ends; a
  dropped CLI that becomes usable again is found again as a new one.

A CLI that gives no version for another reason keeps the one it had (a failed probe is no
version change) until its executable changes again.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass

import anyio

from backends.agent_cli import AgentCli, Fingerprint
from backends.base import Backend
from backends.cli_trust import UntrustedCliError
from backends.version import version_at_least
from daemon.errors import RoundBoundary
from daemon.protocol.runtime_models import OfflineReason
from daemon.worker.registration import Registration
from daemon.worker.unusable import not_executable, not_installed, too_old

log = logging.getLogger(__name__)

CONFIRMATIONS = 2
"""Checks in a row that must find a CLI gone (or not startable) before it is dropped."""


@dataclass(frozen=True, slots=True)
class Finder:
    """How the daemon finds agent CLIs (the command's discovery, handed in): every backend
    the settings make possible, and the versions of those that answer and are usable."""

    candidates: Callable[[], Sequence[Backend]]
    detect: Callable[[list[Backend]], Awaitable[dict[str, str]]]
    installed: Callable[[], Sequence[Backend]] | None = None
    """Those of `candidates` whose executable is there now (None: `candidates`, each looked
    up): what start-up asked, without importing the backend of every CLI it did not find."""


class CliWatch:
    """Looks at each agent CLI's executable every `interval`; what changed is written into
    `backends` (what registering reads) and registered."""

    def __init__(
        self,
        backends: MutableMapping[str, tuple[Backend, str]],
        registration: Registration,
        interval: float,
        *,
        finder: Finder | None = None,
        busy: Callable[[str], bool] = lambda backend: False,
    ) -> None:
        """`backends` is the daemon's own mapping of backend and version, updated in place;
        `finder` finds CLIs installed later (None: none looked for); `busy` says whether a
        task of a backend is running (its runtimes are then not taken offline)."""
        self._backends = backends
        self._registration = registration
        self._interval = interval
        self._finder = finder
        self._busy = busy
        # The executables as detection found them (near enough: taken just after it).
        self._seen: dict[str, Fingerprint | None] = {
            name: _fingerprint(backend) for name, (backend, _) in backends.items()
        }
        self._tried: dict[str, Fingerprint] = _not_offered(backends, finder)
        """Executables of CLIs not found that failed their probe (at start-up, too: refused,
        too old, no version): asked again once changed, not at every check."""
        self._doubts: dict[str, int] = {}
        """Checks in a row that found a CLI gone or not startable, by name."""

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
        """One look at every CLI; the names of those that changed (a version, found, dropped).
        Workspaces whose registered CLIs are behind (now, or after a failed register) are
        registered."""
        changed = [name for name in list(self._backends) if await self._recheck(name)]
        changed += await self._find()
        await self._registration.report_versions()
        return changed

    async def _recheck(self, name: str) -> bool:
        backend, version = self._backends[name]
        found = _fingerprint(backend)
        if found is None:
            if isinstance(backend, AgentCli):
                path = backend.path
                return self._doubt(name, lambda: not_installed(name, path))
            return False
        if found == self._seen.get(name) and name not in self._doubts:
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
        refused = backend.refused if isinstance(backend, AgentCli) else None
        if refused is not None and refused.errno == errno.ENOEXEC:
            return self._doubt(name, lambda: not_executable(found.path, refused))
        self._doubts.pop(name, None)
        if not new:
            log.warning(
                "backend %s: executable %s changed and gave no version; still %s",
                name,
                found.path,
                version,
            )
            return False
        needed = backend.min_version if isinstance(backend, AgentCli) else ""
        if not version_at_least(new, needed):
            return self._drop(name, too_old(name, new, needed))
        if new == version:
            log.info("backend %s: executable %s changed, version still %s", name, found.path, new)
            return False
        log.info(
            "backend %s: version %s -> %s (executable %s changed)", name, version, new, found.path
        )
        self._backends[name] = (backend, new)
        return True

    def _doubt(self, name: str, reason: Callable[[], OfflineReason]) -> bool:
        """One more check found the CLI unusable; dropped once that is confirmed."""
        self._doubts[name] = self._doubts.get(name, 0) + 1
        if self._doubts[name] < CONFIRMATIONS:
            log.warning("backend %s: looks unusable (%s); looking again", name, reason().code)
            return False
        return self._drop(name, reason())

    def _drop(self, name: str, reason: OfflineReason) -> bool:
        """Stop offering the CLI: its runtimes go offline with `reason` at the next register."""
        if self._busy(name):
            log.info("backend %s: unusable (%s), but a task runs on it: kept", name, reason.code)
            return False
        log.warning("backend %s: no longer usable: %s", name, reason.detail)
        self._registration.offline_reasons[name] = reason
        del self._backends[name]
        self._seen.pop(name, None)
        self._doubts.pop(name, None)
        return True

    async def _find(self) -> list[str]:
        """CLIs not found before whose executable is there now (and new since it last failed
        its probe), detected and added."""
        if self._finder is None:
            return []
        fresh: list[Backend] = []
        for backend in self._finder.candidates():
            if backend.name in self._backends or not isinstance(backend, AgentCli):
                continue
            found = backend.fingerprint()
            if found is None:
                self._tried.pop(backend.name, None)
            elif self._tried.get(backend.name) != found:
                self._tried[backend.name] = found
                fresh.append(backend)
        if not fresh:
            return []
        versions = await self._finder.detect(fresh)
        added = []
        for backend in fresh:
            version = versions.get(backend.name)
            if version is None or backend.name in self._backends:
                continue
            log.info("backend %s: found %s, installed since the start", backend.name, version)
            self._backends[backend.name] = (backend, version)
            self._seen[backend.name] = self._tried.pop(backend.name)
            self._registration.offline_reasons.pop(backend.name, None)
            added.append(backend.name)
        return added


def _not_offered(
    backends: MutableMapping[str, tuple[Backend, str]], finder: Finder | None
) -> dict[str, Fingerprint]:
    """The executables of the CLIs start-up detection ran and did not offer (near enough:
    taken just after it)."""
    if finder is None:
        return {}
    installed = finder.installed or finder.candidates
    there = {b.name: _fingerprint(b) for b in installed() if b.name not in backends}
    return {name: found for name, found in there.items() if found is not None}


def _fingerprint(backend: Backend) -> Fingerprint | None:
    """An agent CLI's executable now; None for a backend that is no named CLI."""
    return backend.fingerprint() if isinstance(backend, AgentCli) else None
