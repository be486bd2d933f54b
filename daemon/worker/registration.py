"""This daemon's runtimes on the server: registered per workspace (heartbeats.py keeps them
alive), re-registered (once, coalesced) when the server forgets one, a CLI's version changed,
a CLI came or went, or the workspace's custom runtime profiles changed (profiles.py);
re-synced every half hour and whenever the server says the workspaces changed.

Each register of a workspace carries its whole set — every CLI found here, every profile this
machine runs, the profiles it cannot — and its answer is the workspace's runtimes: a runtime
held before that the answer leaves out (a profile disabled, a CLI no longer usable) is taken
offline on the server at once (`deregister`, with why when it is known), not left to the
server's stale-heartbeat sweep. One workspace registers one call at a time.

Past 300 lines: every path that registers shares the one `_register` and its record of what
each workspace was last told, and splitting them would open those to a second module.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from backends.base import Backend
from daemon.config import Settings
from daemon.errors import (
    DaemonError,
    PermanentServerError,
    RoundBoundary,
    ServerError,
)
from daemon.protocol.client import ServerClient
from daemon.protocol.models import RepoRef, Task
from daemon.protocol.release import cli_version
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.runtime_models import OfflineReason, RuntimeInfo, Workspace
from daemon.protocol.runtime_names import runtime_name
from daemon.wakeup import Wakeup
from daemon.worker.profiles import NOT_FETCHED, Profiles, ProfileSet, signature

log = logging.getLogger(__name__)

REGISTER_RETRY = RetryPolicy((1.0,), max_tries=0, max_wait=30.0, jitter=0.0)
"""Registration is tried until the server answers: after 1 s, 2 s, 4 s, ... at most 30 s."""
COALESCE_WINDOW = 30.0
"""One re-register per workspace per 30 s, however many of its runtimes are reported gone."""
FAILURE_BACKOFF = 60.0
"""After a failed re-register, the workspace waits 60 s (the workspace sync retries too)."""


@dataclass(frozen=True, slots=True)
class Listeners:
    """What the rest of the daemon hears from registration (each called on the event loop)."""

    repos: Callable[[str, list[RepoRef], dict[str, Any] | None], None] | None = None
    """A workspace's repositories and settings, as each register's answer gives them."""
    changed: Callable[[], None] | None = None
    """The set of runtimes changed."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """A server-side runtime: one backend registered in one workspace."""

    id: str
    workspace_id: str
    backend: Backend
    profile_id: str = ""
    """The custom runtime profile it runs ("": a CLI found on this machine)."""


class Registration:
    """Registers every backend in every workspace the token serves, and keeps it registered.

    As Multica's daemon does: a workspace whose register fails is logged and skipped; a
    runtime the server answers 404 for is dropped and its workspace registered again once
    (coalesced per workspace); a workspace sync adds new workspaces, drops vanished ones and
    retries workspaces left without runtimes.
    """

    def __init__(
        self,
        client: ServerClient,
        settings: Settings,
        backends: Mapping[str, tuple[Backend, str]],
        daemon_id: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        listeners: Listeners = Listeners(),
        legacy_ids: Sequence[str] = (),
        profiles: Profiles | None = None,
    ) -> None:
        """`legacy_ids`: the ids this machine registered under before (`legacy_daemon_ids`);
        `listeners` hear of repositories and of changes to the set of runtimes; `profiles`:
        how each workspace's custom runtime profiles are run (None: not read)."""
        self._listeners = listeners
        self._client = client
        self.legacy_ids = tuple(legacy_ids)
        self._settings = settings
        self._backends = backends
        self.daemon_id = daemon_id
        self._clock = clock
        self.by_workspace: dict[str, list[Runtime]] = {}
        self.names: dict[str, str] = {}
        self._changed = anyio.Event()
        self._gone_inflight: set[str] = set()
        self._next_attempt: dict[str, float] = {}
        self._last_completed: dict[str, float] = {}
        self._sync_now = Wakeup()
        self._sent: dict[str, dict[str, str]] = {}
        """The versions each workspace's last accepted register carried, by backend."""
        self._held: set[str] = set()
        """Every runtime id a register answered in this process, dropped ones included."""
        self._profiles = profiles
        self._profile_sets: dict[str, ProfileSet] = {}
        """Each workspace's profiles as last registered (their signature says which set)."""
        self._locks: dict[str, anyio.Lock] = {}
        self.offline_reasons: dict[str, OfflineReason] = {}
        """Why a backend's runtimes go offline, by backend name (set before it is dropped)."""

    @property
    def runtimes(self) -> list[Runtime]:
        """Every runtime now registered, workspace by workspace."""
        return [r for runtimes in self.by_workspace.values() for r in runtimes]

    def runtime_ids(self) -> list[str]:
        """The ids of every runtime now registered (what the control channel subscribes to)."""
        return [r.id for r in self.runtimes]

    @property
    def workspaces(self) -> list[dict[str, str]]:
        """The workspaces served (id and name), those without runtimes included."""
        return [{"id": w, "name": self.names.get(w, "")} for w in self.by_workspace]

    async def wait_changed(self) -> None:
        """Return when the set of runtimes changes next."""
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()
        if self._listeners.changed is not None:
            self._listeners.changed()

    async def register_when_reachable(self) -> None:
        """Register, waiting out a server that is down; fatal only when nothing registered."""
        failures = 0
        while True:
            try:
                refused = await self.sync(recover=False)
            except PermanentServerError as exc:
                raise DaemonError(f"the server refused the daemon's registration: {exc}") from None
            except ServerError as exc:
                refused = exc
            else:
                if self.runtimes or refused is None:
                    return
                if isinstance(refused, PermanentServerError):
                    raise DaemonError(f"the server refused the daemon's registration: {refused}")
            failures += 1
            delay = REGISTER_RETRY.delay(failures) or 0.0  # never None: no try limit
            log.warning("server not reachable for registration (%s); again in %ss", refused, delay)
            await REGISTER_RETRY.sleep(delay)

    async def sync(self, *, recover: bool = True) -> ServerError | None:
        """One workspace sync: register new workspaces and those without runtimes, drop
        vanished ones. Returns the last register error (the workspace was skipped)."""
        listed = await self._client.workspaces()
        last_error: ServerError | None = None
        changed = False
        for workspace in listed:
            self.names[workspace.id] = workspace.name
            if self.by_workspace.get(workspace.id):
                continue
            try:
                await self._register(workspace, recover=recover)
                changed = True
            except ServerError as exc:
                self.by_workspace.setdefault(workspace.id, [])
                log.error("workspace %s: register failed, skipped: %s", workspace.id, exc)
                last_error = exc
        listed_ids = {w.id for w in listed}
        for gone in [w for w in self.by_workspace if w not in listed_ids]:
            log.info("workspace %s: no longer served: dropping its runtimes", gone)
            del self.by_workspace[gone]
            self.names.pop(gone, None)
            self._sent.pop(gone, None)
            self._profile_sets.pop(gone, None)
            changed = True
        if changed:
            self._notify()
        return last_error

    async def _register(
        self, workspace: Workspace, *, recover: bool, profiles: ProfileSet | None = None
    ) -> list[Runtime]:
        """Register every backend and profile in one workspace; the answer replaces its
        runtimes, and those it leaves out go offline. `profiles`: the set already read."""
        lock = self._locks.setdefault(workspace.id, anyio.Lock())
        async with lock:
            return await self._register_locked(workspace, recover, profiles)

    async def _register_locked(
        self, workspace: Workspace, recover: bool, profiles: ProfileSet | None
    ) -> list[Runtime]:
        device = self._settings.device_name
        sent = self._versions()
        if profiles is None:
            profiles = await self._read_profiles(workspace.id)
        infos = [
            RuntimeInfo(name=runtime_name(name, device), type=name, version=version)
            for name, (_, version) in self._backends.items()
        ] + [p.info for p in profiles.runtimes]
        before = self.by_workspace.get(workspace.id, [])
        if not infos and not profiles.failed:
            # Nothing this machine can run there any more (its CLIs unusable, its profiles
            # disabled): a register would be refused; what it held goes offline.
            self.by_workspace[workspace.id] = []
            self._sent[workspace.id] = sent
            await self._deregister(before)
            return []
        answer = await self._client.register(
            workspace.id,
            self.daemon_id,
            device,
            cli_version(),
            infos,
            self.legacy_ids,
            profiles.failed,
        )
        by_profile = {p.profile_id: p.backend for p in profiles.runtimes}
        runtimes: list[Runtime] = []
        for info, registered in zip(infos, answer.runtimes, strict=False):
            profile = registered.profile_id or info.profile_id or ""
            if profile in by_profile:
                runtimes.append(Runtime(registered.id, workspace.id, by_profile[profile], profile))
                continue
            name = registered.provider if registered.provider in self._backends else info.type
            if name in self._backends:
                runtimes.append(Runtime(registered.id, workspace.id, self._backends[name][0]))
        self.by_workspace[workspace.id] = runtimes
        self._sent[workspace.id] = sent
        if profiles.signature is not None:
            self._profile_sets[workspace.id] = profiles
        if self._listeners.repos is not None:
            self._listeners.repos(workspace.id, answer.repos, answer.settings)
        log.info(
            "workspace %s: registered runtimes %s", workspace.id, ", ".join(r.id for r in runtimes)
        )
        kept = {r.id for r in runtimes}
        await self._deregister([r for r in before if r.id not in kept])
        if recover:
            await recover_orphans(self._client, self._new(runtimes))
        self._held.update(r.id for r in runtimes)
        return runtimes

    async def _read_profiles(self, workspace_id: str) -> ProfileSet:
        """The workspace's profiles as this machine runs them; when the server does not say,
        the set last registered (a failed read is no change)."""
        if self._profiles is None:
            return NOT_FETCHED
        found = await self._profiles.of(workspace_id)
        if found.signature is None:
            return self._profile_sets.get(workspace_id, NOT_FETCHED)
        return found

    async def _deregister(self, dropped: list[Runtime]) -> None:
        """Take runtimes this daemon no longer runs offline on the server now (best effort:
        its stale-heartbeat sweep would, minutes later), with why where that is known."""
        if not dropped:
            return
        reasons = {
            r.id: self.offline_reasons[r.backend.name]
            for r in dropped
            if not r.profile_id and r.backend.name in self.offline_reasons
        }
        ids = [r.id for r in dropped]
        log.info("runtimes %s: no longer run here: taken offline", ", ".join(ids))
        try:
            await self._client.deregister(ids, reasons)
        except ServerError as exc:
            log.warning("runtimes %s: deregister failed: %s", ", ".join(ids), exc)

    async def refresh_profiles(self, workspace_id: str) -> None:
        """The server says the workspace's profiles changed (or the control channel came
        back, and they may have): read them, and register again when the set differs from
        the one registered (a repeated notice costs one read)."""
        if self._profiles is None or workspace_id not in self.by_workspace:
            return
        listed = await self._profiles.fetch(workspace_id)
        if listed is None:
            return
        known = self._profile_sets.get(workspace_id)
        if known is not None and known.signature == signature(listed):
            return
        log.info("workspace %s: custom runtime profiles changed: registering again", workspace_id)
        built = await self._profiles.build(workspace_id, listed)
        workspace = Workspace(id=workspace_id, name=self.names.get(workspace_id, ""))
        before = {r.id for r in self.by_workspace.get(workspace_id, [])}
        try:
            # No orphans recovered: the workspace's other runtimes may be running tasks.
            registered = await self._register(workspace, recover=False, profiles=built)
        except ServerError as exc:
            log.warning("workspace %s: registering the profiles failed: %s", workspace_id, exc)
            return
        if {r.id for r in registered} != before:
            self._notify()

    def _new(self, runtimes: list[Runtime]) -> list[Runtime]:
        """The runtimes whose ids this process never held. One it held came back unchanged:
        the server never deleted it (a 404 from a proxy or another server on its address was
        taken for a deletion), so its in-flight tasks are ones running here, not orphans, and
        recover-orphans would fail them under their running agents."""
        kept = [r.id for r in runtimes if r.id in self._held]
        if kept:
            log.warning(
                "runtimes %s: registered again under the same ids: their tasks run here; "
                "no orphans recovered",
                ", ".join(kept),
            )
        return [r for r in runtimes if r.id not in self._held]

    def request_sync(self) -> None:
        """Sync the workspaces now (the server said they changed), not at the next interval."""
        self._sync_now.set()

    def _versions(self) -> dict[str, str]:
        return {name: version for name, (_, version) in self._backends.items()}

    async def report_versions(self) -> None:
        """Register again each workspace whose last accepted register carried other versions
        than the backends have now, or other backends (a CLI found, one no longer usable):
        the server upserts its runtimes (running tasks untouched, no orphans recovered), and
        a backend left out goes offline; a failure leaves the workspace behind, for the next
        call to retry."""
        now = self._versions()
        for workspace_id, runtimes in list(self.by_workspace.items()):
            sent = self._sent.get(workspace_id)
            # A workspace never registered is the workspace sync's to register; one left
            # without runtimes here (its CLIs unusable) gets them back here when one returns.
            if sent is None or sent == now:
                continue
            changes = ", ".join(
                [
                    f"{name} {sent.get(name) or '-'} -> {version}"
                    for name, version in now.items()
                    if sent.get(name) != version
                ]
                + [f"{name} gone" for name in sent if name not in now]
            )
            log.info(
                "workspace %s: agent CLIs changed (%s): registering again",
                workspace_id,
                changes,
            )
            workspace = Workspace(id=workspace_id, name=self.names.get(workspace_id, ""))
            try:
                registered = await self._register(workspace, recover=False)
            except ServerError as exc:
                log.warning("workspace %s: registering new versions failed: %s", workspace_id, exc)
                continue
            if {r.id for r in registered} != {r.id for r in runtimes}:
                self._notify()

    async def sync_loop(self) -> None:
        """Sync the workspaces every `workspace_sync_interval` (jittered ±10 %), or at once
        when asked; the interval starts again after each sync."""
        interval = self._settings.workspace_sync_interval
        boundary = RoundBoundary("workspace sync")
        while True:
            if await self._sync_now.wait(interval * random.uniform(0.9, 1.1)):
                log.info("workspace sync: the server says the workspaces changed")
            with boundary:
                try:
                    await self.sync()
                except ServerError as exc:
                    log.warning("workspace sync failed: %s", exc)

    async def runtime_gone(self, runtime_id: str) -> None:
        """The server forgot a runtime: drop it, register its workspace again (coalesced)."""
        entered = self._clock()
        if runtime_id in self._gone_inflight:
            return
        self._gone_inflight.add(runtime_id)
        try:
            workspace_id = self._drop(runtime_id)
            if workspace_id is None:
                return  # already dropped by a sibling's recovery or a workspace sync
            log.warning("runtime %s: deleted on the server: dropped", runtime_id)
            self._notify()
            await self.reregister(workspace_id, entered)
        finally:
            self._gone_inflight.discard(runtime_id)

    async def reregister(self, workspace_id: str, entered: float) -> None:
        """Register one workspace again unless a recent attempt covers this one."""
        if not self._claim_slot(workspace_id, entered):
            return
        try:
            workspace = Workspace(id=workspace_id, name=self.names.get(workspace_id, ""))
            await self._register(workspace, recover=True)
        except ServerError as exc:
            self._next_attempt[workspace_id] = self._clock() + FAILURE_BACKOFF
            log.warning("workspace %s: re-register failed: %s", workspace_id, exc)
            return
        self._last_completed[workspace_id] = self._clock()
        self._next_attempt.pop(workspace_id, None)
        self._notify()

    async def register_again(self, why: str) -> None:
        """Some runtime is unknown to the server (which one is not said): re-register all."""
        log.warning("%s: runtime unknown to the server: registering again", why)
        entered = self._clock()
        for workspace_id in list(self.by_workspace):
            await self.reregister(workspace_id, entered)

    def _claim_slot(self, workspace_id: str, entered: float) -> bool:
        # A future next-attempt: a peer holds the slot or a failure backs off. A completion
        # after we entered: a peer's register already covered this wave.
        now = self._clock()
        if now < self._next_attempt.get(workspace_id, float("-inf")):
            return False
        if self._last_completed.get(workspace_id, float("-inf")) >= entered:
            return False
        self._next_attempt[workspace_id] = now + COALESCE_WINDOW
        return True

    def _drop(self, runtime_id: str) -> str | None:
        for workspace_id, runtimes in self.by_workspace.items():
            kept = [r for r in runtimes if r.id != runtime_id]
            if len(kept) != len(runtimes):
                self.by_workspace[workspace_id] = kept
                return workspace_id
        return None

    def runtime(self, runtime_id: str) -> Runtime | None:
        """The registered runtime with this id, if it is one of ours."""
        return next((r for r in self.runtimes if r.id == runtime_id), None)

    def backend_for(self, task: Task) -> Backend:
        """The backend of the task's runtime, else the one it names, else the first."""
        for runtime in self.runtimes:
            if runtime.id == task.runtime_id:
                return runtime.backend
        if task.backend in self._backends:
            return self._backends[task.backend][0]
        return next(iter(self._backends.values()))[0]


async def recover_orphans(client: ServerClient, runtimes: list[Runtime]) -> None:
    """Have the server fail what these runtimes left in flight (a crash, a deleted runtime)."""
    for runtime in runtimes:
        try:
            result = await client.recover_orphans(runtime.id)
        except ServerError as exc:
            log.warning("recover-orphans for %s failed: %s", runtime.id, exc)
            continue
        if result.orphaned:
            log.warning("runtime %s: server failed %d orphaned tasks", runtime.id, result.orphaned)
