"""Each runtime's model catalog, read from its CLI at most once a minute: the answer to the
server's model-list request, and what a task's thinking level and service tier are checked
against before its agent starts.

As Multica's daemon keeps them: by CLI family and command (a custom runtime profile runs
another executable, or the same one with other fixed arguments, and may list other models),
for 60 s, and never an empty catalog or a stand-in one (discovery failed: the next request
tries again at once). Two reads of one CLI at the same time are one read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio

from backends.agent_cli import AgentCli
from backends.base import Backend
from backends.models import EMPTY, Catalog, DiscoveryFailed

log = logging.getLogger(__name__)

TTL = 60.0
"""Seconds a catalog is kept."""
READ_WITHIN = 45.0
"""A read that takes longer is given up (the server waits 60 s for the answer)."""


class ModelCatalogs:
    """The catalogs read so far, by CLI, each kept for `TTL` seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl: float = TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._kept: dict[tuple[str, ...], tuple[float, Catalog]] = {}
        self._locks: dict[tuple[str, ...], anyio.Lock] = {}
        self.reads = 0
        """Catalogs read from a CLI (not from what was kept): tests and `status` count them."""

    async def of(self, backend: Backend) -> Catalog:
        """The backend's catalog: kept, else read now (none for a backend that is no CLI)."""
        if not isinstance(backend, AgentCli):
            return EMPTY
        key = (backend.name, *backend.command())
        async with self._locks.setdefault(key, anyio.Lock()):
            kept = self._kept.get(key)
            if kept is not None and self._clock() < kept[0]:
                return kept[1]
            self.reads += 1
            catalog = EMPTY
            with anyio.move_on_after(READ_WITHIN) as bounded:
                catalog = await backend.models()
            if bounded.cancelled_caught:
                log.warning("%s: no model catalog within %.0fs", backend.name, READ_WITHIN)
            if catalog.models and not catalog.fallback:
                self._kept[key] = (self._clock() + self._ttl, catalog)
            log.info("%s: %d models%s", backend.name, len(catalog.models), _said(catalog))
            return catalog

    async def result(self, backend: Backend | None) -> dict[str, Any]:
        """The body of a model-list result for a runtime's backend (None: not one of ours)."""
        if backend is None:
            return {"status": "failed", "error": "the runtime is not registered by this daemon"}
        try:
            return (await self.of(backend)).result()
        except DiscoveryFailed as exc:  # the CLI's own answer: no catalog this time
            log.warning("%s: model discovery failed: %s", backend.name, exc)
            return {"status": "failed", "error": f"model discovery failed: {exc}"}
        except Exception as exc:  # a discovery bug fails this answer, never the daemon
            log.exception("%s: model discovery failed", backend.name)
            return {"status": "failed", "error": f"model discovery failed: {exc}"}


def _said(catalog: Catalog) -> str:
    if catalog.fallback:
        return " (a stand-in list: discovery failed)"
    return "" if catalog.supported else " (the model is the CLI's own to choose)"
