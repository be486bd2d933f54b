"""The health port: `/health`, `/healthz`, `/readyz`, `/metrics`, `POST /shutdown`, the status
page (`/`, page.py), and the routes other parts of the daemon mount on it (`POST
/repo/checkout`).

It is served by threads of its own (health_http.py), not by the daemon's event loop, so a
wedged loop shows up as a 503 on `/healthz` instead of a connection that never answers, and
`/metrics` still answers while the loop is busy. The Prometheus registry is read from the
threads directly: prometheus_client guards every value with its own lock for exactly this use.
Otherwise the loop and the threads share one flag: every tick the loop stamps the time it last
ran and, when the document is due, builds a new one from the daemon's snapshot and swaps the
reference the threads read (one atomic assignment). A document is due on the tick after a
request read it or the status page's JSON (the flag), and at least every `REFRESH_TICKS` ticks:
a port nobody reads costs a snapshot of every run every two seconds, not twice a second.
What readiness rests on is not left to that schedule: the worker tells the port when its
runtimes or its status change (`changed`), and the document is built then, so `/readyz` and
`/health`'s status follow registration at once rather than up to a refresh later.

A second daemon on the same address gets `AlreadyRunningError`. The same loop tick drives
systemd's notify protocol: READY=1 once the worker runs, WATCHDOG=1 while the loop ticks,
STOPPING=1 when it stops.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal

from daemon.addresses import join_host_port, split_host_port
from daemon.ops.health_access import (
    CHALLENGE_PATH,
    Challenges,
    bears_token,
    host_allowed,
    proves_token,
)
from daemon.ops.health_doc import health_document, with_uptime, without_ids
from daemon.ops.health_http import MAX_CONNECTIONS, REQUEST_DEADLINE, HttpPort, bind
from daemon.ops.health_request import Reply, local_refusal
from daemon.ops.metrics import Metrics
from daemon.ops.page import JSON_PATH as PAGE_JSON
from daemon.ops.page import PATHS as PAGES
from daemon.ops.page import Page
from daemon.ops.sdnotify import Notifier, ServiceState
from daemon.snapshot import DaemonSnapshot

log = logging.getLogger(__name__)

TICK = 0.5
"""Seconds between loop ticks (health document, liveness stamp, gauges, systemd watchdog)."""
REFRESH_TICKS = 4
"""Ticks a health document is served, unread, before one builds the next anyway (2 s, for
systemd's status line and the gauges); one that was read is rebuilt on the next tick."""
STALE_AFTER = 5.0
"""`/healthz` answers 503 once the loop has not ticked for this long."""
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_CLOSE_BOUND = 5.0
_HANDOFF_WAIT = 2.0
_READS_DOCUMENT = frozenset({"/health", "/readyz", PAGE_JSON})
ROUTES = (
    "GET /health",
    f"GET {CHALLENGE_PATH}",
    "GET /healthz",
    "GET /readyz",
    "GET /metrics",
    "POST /shutdown",
    *(f"GET {path}" for path in PAGES),
)

Mounted = Callable[[str, str, Mapping[str, str], bytes], Reply]
"""A mounted route: (method, peer address, headers, body) -> the reply, on a request thread;
it answers every method itself (405 for the ones it does not take)."""


def _doc(status: int, doc: dict[str, Any]) -> Reply:
    """A JSON reply."""
    return Reply(status, json.dumps(doc, separators=(",", ":")).encode())


class HealthServer:
    """Serves the health port for one daemon; holding its address is the single-instance lock."""

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        *,
        notifier: Notifier | None = None,
        stale_after: float = STALE_AFTER,
        tick: float = TICK,
        clock: Callable[[], float] = time.monotonic,
        max_connections: int = MAX_CONNECTIONS,
        request_deadline: float = REQUEST_DEADLINE,
    ) -> None:
        self.host, self.port = split_host_port(address)
        self._max_connections = max_connections
        self._request_deadline = request_deadline
        self._metrics = metrics
        self._stale_after = stale_after
        self._tick_every = tick
        self._refresh = REFRESH_TICKS * tick
        self._clock = clock
        self._pid = os.getpid()
        self._started = clock()
        self._started_wall = time.time()
        self.page = Page(started_wall=self._started_wall, clock=clock)
        self._snapshot: Callable[[], DaemonSnapshot] | None = None
        self._lag: Callable[[], float] | None = None
        self._stop: Callable[[], None] | None = None
        self._portal: BlockingPortal | None = None
        # Written by the loop only, read by the HTTP thread: each is replaced whole, never
        # mutated, so a reader sees either the old or the new value.
        self._doc: dict[str, Any] = health_document(
            None, pid=self._pid, started_wall=self._started_wall
        )
        self._public_doc = without_ids(self._doc)
        self._token = ""
        self._challenges = Challenges(clock=clock)
        self._published_at = self._started
        self._alive_at = self._started
        self._read = True
        """Set by a request thread that read the document (or the page): build it anew."""
        self._systemd = ServiceState(notifier or Notifier(None))
        self._last_error = ""
        self._mounted: dict[str, Mounted] = {}

    def mount(self, path: str, handler: Mounted) -> None:
        """Serve `handler` at `path` from now on (request threads read the table)."""
        self._mounted[path] = handler

    def attach(
        self,
        snapshot: Callable[[], DaemonSnapshot],
        stop: Callable[[], None],
        token: str = "",
        lag: Callable[[], float] | None = None,
    ) -> None:
        """Show what `snapshot` returns from the next tick on; `POST /shutdown` calls `stop`;
        a request bearing `token` (the daemon's own) reads `/health` with full ids; `lag`
        (the longest transcript lag now) samples the page's chart on ticks that build no
        document.

        All are called on the event loop. Call `attach` on the event loop too.
        """
        self._snapshot = snapshot
        self._lag = lag
        self._stop = stop
        self._token = token
        self.tick(publish=True)

    def changed(self) -> None:
        """What the document shows changed (the daemon registered, its status moved): build
        it now, not at the next read or refresh. Call it on the event loop."""
        self.tick(publish=True)

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, serve from a thread and tick until cancelled; reports the bound port.

        `port = await tg.start(health.serve)`. Raises `AlreadyRunningError` when the address
        is taken, before anything else starts.
        """
        sock = bind(self.host, self.port)
        port = int(sock.getsockname()[1])
        http = HttpPort(
            sock,
            self.route,
            max_connections=self._max_connections,
            deadline=self._request_deadline,
        )
        try:
            async with BlockingPortal() as portal:
                self._portal = portal
                self.tick()
                http.start()
                log.info("health port listening on http://%s", join_host_port(self.host, port))
                task_status.started(port)
                try:
                    while True:
                        await anyio.sleep(self._tick_every)
                        self.tick()
                finally:
                    self._portal = None
                    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_BOUND):
                        self._systemd.stopping()
                        await anyio.to_thread.run_sync(http.stop, abandon_on_cancel=True)
        finally:
            http.stop(wait=0)
            log.info("health port closed")

    def tick(self, *, publish: bool = False) -> None:
        """One loop tick: stamp liveness, publish the document (and its gauge) when it is due
        (or `publish`), tell systemd."""
        now = self._clock()
        self._alive_at = now
        if publish or self._due(now):
            self._publish(now)
        elif self._lag is not None:
            self.page.samples.observe(self._lag())
        self._systemd.tell(self._doc, now)

    def _due(self, now: float) -> bool:
        """A request read the last document, it is `REFRESH_TICKS` old, or systemd awaits
        READY."""
        if self._read or now - self._published_at >= self._refresh:
            return True
        return self._systemd.awaiting_ready

    def _publish(self, now: float) -> None:
        self._read = False  # before the build: a read during it asks for the next one
        try:
            snapshot = self._snapshot() if self._snapshot is not None else None
            doc = health_document(snapshot, pid=self._pid, started_wall=self._started_wall)
        except Exception as exc:
            # The health port reports on the daemon; a bug in the report must not stop it.
            # The last good document stays up, its growing snapshot_age_seconds shows it.
            if repr(exc) != self._last_error:
                self._last_error = repr(exc)
                log.exception("health document failed; serving the last one")
        else:
            self._doc, self._public_doc = doc, without_ids(doc)
            self._published_at = now
            self.page.publish(snapshot)
            self._metrics.heartbeat_age.set(doc["last_message_age_seconds"])

    # --- the HTTP thread's side: reads only the published values -------------------------

    def route(
        self,
        method: str,
        path: str,
        peer: str,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> Reply:
        """The answer to one request (`headers` with lower-case names); runs on a thread."""
        mounted = self._mounted.get(path)
        if path in _READS_DOCUMENT:
            self._read = True
        if mounted is not None:
            return mounted(method, peer, headers or {}, body)
        handlers: dict[tuple[str, str], Callable[[], Reply]] = {
            ("GET", "/health"): lambda: self._health(headers or {}),
            ("GET", CHALLENGE_PATH): self._challenge,
            ("GET", "/healthz"): self._healthz,
            ("GET", "/readyz"): self._readyz,
            ("GET", "/metrics"): self._scrape,
            ("POST", "/shutdown"): lambda: self._shutdown(peer, headers or {}),
            **{("GET", p): functools.partial(self.page.answer, p, headers or {}) for p in PAGES},
        }
        handler = handlers.get((method, path))
        if not host_allowed((headers or {}).get("host"), self.host):
            # A DNS-rebinding page reaches this port under its own domain name and could read
            # `/health` (ids, pids, the server URL, workspace names): only addresses and this
            # machine's names are answered.
            return _doc(403, {"error": "the health port answers only to an address (Host)"})
        if handler is not None:
            return handler()
        if any(route.endswith(f" {path}") for route in ROUTES):
            return _doc(405, {"error": f"{method} not allowed on {path}"})
        routes = [*ROUTES, *(f"POST {p}" for p in self._mounted)]
        return _doc(404, {"error": f"no route {path}", "routes": routes})

    def _health(self, headers: Mapping[str, str]) -> Reply:
        now = self._clock()
        token, challenges = self._token, self._challenges
        full = bears_token(headers, token) or proves_token(
            headers, token, challenges, "GET", "/health"
        )
        shown = self._doc if full else self._public_doc
        doc = with_uptime(shown, now - self._started, now - self._published_at)
        return _doc(200, doc)

    def _challenge(self) -> Reply:
        """A nonce for `agent-daemon status` to prove it holds the token (health_access.py)."""
        nonce = self._challenges.issue()
        return _doc(200, {"nonce": nonce, "expires_in": self._challenges.ttl})

    def _healthz(self) -> Reply:
        age = self._clock() - self._alive_at
        if age > self._stale_after:
            reason = f"event loop stalled: no tick for {age:.1f}s (limit {self._stale_after:g}s)"
            return _doc(503, {"status": "stalled", "reason": reason, "loop_age": age})
        return _doc(200, {"status": "ok", "loop_age": round(age, 3)})

    def _readyz(self) -> Reply:
        doc = self._doc
        if not doc["registered"]:
            return _doc(503, {"status": "not_ready", "reason": "not registered yet"})
        if doc["server_circuit"] == "open":
            reason = "server circuit open: the server keeps failing"
            return _doc(503, {"status": "not_ready", "reason": reason})
        ready = {"status": "ready", "daemon_id": doc["daemon_id"]}
        return _doc(200, {**ready, "agents_as_root": doc["agents_as_root"]})

    def _scrape(self) -> Reply:
        return Reply(200, self._metrics.exposition(), METRICS_CONTENT_TYPE)

    def _shutdown(self, peer: str, headers: Mapping[str, str]) -> Reply:
        refused = local_refusal(peer, headers)
        if refused is not None:
            return _doc(403, {"error": f"shutdown is {refused}"})
        portal = self._portal
        if portal is None:
            return _doc(503, {"error": "the health port is closing"})
        try:
            future = portal.start_task_soon(self._request_stop)
        except RuntimeError:
            return _doc(503, {"error": "the health port is closing"})
        try:
            accepted = future.result(timeout=_HANDOFF_WAIT)
        except FutureTimeout:
            # The loop is busy; the handoff stays queued and runs once it gets a turn.
            return _doc(202, {"status": "stop_queued", "reason": "the event loop is busy"})
        if not accepted:
            return _doc(503, {"error": "the daemon has not started its worker yet"})
        return _doc(202, {"status": "stopping"})

    def _request_stop(self) -> bool:
        """Runs on the event loop (handed over through the portal)."""
        if self._stop is None:
            return False
        log.info("shutdown requested on the health port")
        self._stop()
        self.tick(publish=True)
        return True
