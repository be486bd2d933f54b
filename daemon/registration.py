"""This daemon's runtimes on the server: registered per workspace, kept alive by heartbeats,
registered again when the server forgets them."""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio

import daemon
from backends.base import Backend
from daemon.config import Settings
from daemon.errors import DaemonError, PermanentServerError, RuntimeGoneError, ServerError
from daemon.files import ensure_dir, write_atomic
from daemon.protocol.client import ServerClient
from daemon.protocol.models import RuntimeInfo, Task
from daemon.protocol.retry import RetryPolicy

log = logging.getLogger(__name__)

REGISTER_RETRY = RetryPolicy((1.0,), max_tries=0, max_wait=30.0, jitter=0.0)
"""Registration is tried until the server answers: after 1 s, 2 s, 4 s, ... at most 30 s."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """A server-side runtime: one backend registered in one workspace."""

    id: str
    workspace_id: str
    backend: Backend


class Registration:
    """Registers every backend in every workspace the token serves, and keeps it registered."""

    def __init__(
        self,
        client: ServerClient,
        settings: Settings,
        backends: Mapping[str, tuple[Backend, str]],
        daemon_id: str,
    ) -> None:
        self._client = client
        self._settings = settings
        self._backends = backends
        self.daemon_id = daemon_id
        self.runtimes: list[Runtime] = []
        self.workspaces: list[dict[str, str]] = []
        self.on_change: Callable[[], None] = lambda: None
        """Called when a registration changed the set of runtime ids."""

    async def register_when_reachable(self) -> None:
        """Register, waiting out a server that is down or failing; a refusal is fatal."""
        failures = 0
        while True:
            try:
                await self.register()
                return
            except PermanentServerError as exc:
                raise DaemonError(f"the server refused the daemon's registration: {exc}") from None
            except ServerError as exc:
                failures += 1
                delay = REGISTER_RETRY.delay(failures) or 0.0  # never None: no try limit
                log.warning("server not reachable for registration (%s); again in %ss", exc, delay)
            await REGISTER_RETRY.sleep(delay)

    async def register(self) -> None:
        """Register once; the server's answer replaces the runtimes known so far."""
        workspaces = await self._client.workspaces()
        self.workspaces = [{"id": w.id, "name": w.name} for w in workspaces]
        device = self._settings.device_name
        infos = [
            RuntimeInfo(name=f"{name} ({device})", type=name, version=version)
            for name, (_, version) in self._backends.items()
        ]
        runtimes: list[Runtime] = []
        for workspace in workspaces:
            answer = await self._client.register(
                workspace.id, self.daemon_id, device, daemon.__version__, infos
            )
            for info, registered in zip(infos, answer.runtimes, strict=False):
                name = registered.provider if registered.provider in self._backends else info.type
                runtimes.append(Runtime(registered.id, workspace.id, self._backends[name][0]))
        changed = [r.id for r in runtimes] != self.runtime_ids()
        self.runtimes = runtimes
        if changed:
            self.on_change()

    def runtime_ids(self) -> list[str]:
        """The ids of the runtimes registered now."""
        return [r.id for r in self.runtimes]

    async def register_again(self, why: str) -> None:
        """The server no longer knows a runtime: register again (a failure is only logged)."""
        log.warning("%s: runtime unknown to the server: registering again", why)
        try:
            await self.register()
        except ServerError as exc:
            log.warning("re-register failed: %s", exc)

    async def heartbeat(self, runtime: Runtime) -> None:
        """Heartbeat one runtime on its own schedule; nothing else can delay it."""
        interval = self._settings.heartbeat_interval
        await anyio.sleep(random.uniform(0, interval))
        while True:
            try:
                await self._client.heartbeat(runtime.id)
            except RuntimeGoneError:
                await self.register_again(f"heartbeat {runtime.id}")
            except ServerError as exc:
                log.warning("heartbeat %s failed: %s", runtime.id, exc)
            await anyio.sleep(interval)

    def backend_for(self, task: Task) -> Backend:
        """The backend of the task's runtime, else the one it names, else the first."""
        for runtime in self.runtimes:
            if runtime.id == task.runtime_id:
                return runtime.backend
        if task.backend in self._backends:
            return self._backends[task.backend][0]
        return next(iter(self._backends.values()))[0]


def stored_daemon_id(settings: Settings) -> str:
    """A daemon id that survives restarts, kept in the state directory."""
    path = settings.state_dir / "daemon_id"
    try:
        stored = path.read_text().strip()
        if stored:
            return stored
    except OSError:
        pass
    new = str(uuid.uuid4())
    ensure_dir(path.parent)
    write_atomic(path, new + "\n")
    return new
