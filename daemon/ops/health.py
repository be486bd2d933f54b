"""The health port: `/health`, `/healthz`, `/readyz`, `/metrics` and `POST /shutdown`.

It is served by a thread of its own, not by the daemon's event loop, so a wedged loop shows up
as a 503 on `/healthz` instead of a connection that never answers, and `/metrics` still
answers while the loop is busy. The loop and the thread share nothing mutable: every tick the
loop builds a new health document and swaps the reference the thread reads (one atomic
assignment), and stamps the time it last ran. The Prometheus registry is read from the thread
directly: prometheus_client guards every value with its own lock for exactly this use.

Binding the port is also the single-instance lock: a second daemon on the same address gets
`AlreadyRunningError`. The same loop tick drives systemd's notify protocol: READY=1 once the
worker runs, WATCHDOG=1 while the loop ticks, STOPPING=1 when it stops.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from anyio.from_thread import BlockingPortal

from daemon.errors import AlreadyRunningError, ConfigError
from daemon.ops.health_doc import health_document, with_uptime
from daemon.ops.metrics import Metrics
from daemon.ops.sdnotify import Notifier

if TYPE_CHECKING:
    from daemon.worker import Worker

log = logging.getLogger(__name__)

TICK = 0.5
"""Seconds between loop ticks (health document, liveness stamp, gauges, systemd watchdog)."""
STALE_AFTER = 5.0
"""`/healthz` answers 503 once the loop has not ticked for this long."""
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JSON_CONTENT_TYPE = "application/json"
_CLOSE_BOUND = 5.0
_HANDOFF_WAIT = 2.0
_MAX_BODY = 64 * 1024
ROUTES = ("GET /health", "GET /healthz", "GET /readyz", "GET /metrics", "POST /shutdown")


@dataclass(frozen=True, slots=True)
class Reply:
    """One HTTP answer of the health port."""

    status: int
    body: bytes
    content_type: str = JSON_CONTENT_TYPE

    @classmethod
    def doc(cls, status: int, doc: dict[str, Any]) -> Reply:
        """A JSON reply."""
        return cls(status, json.dumps(doc, separators=(",", ":")).encode())


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
    ) -> None:
        host, _, port = address.rpartition(":")
        self.host = host.strip("[]")
        self.port = int(port)
        self._metrics = metrics
        self._notifier = notifier or Notifier(None)
        self._stale_after = stale_after
        self._tick_every = tick
        self._clock = clock
        self._pid = os.getpid()
        self._started = clock()
        self._started_wall = time.time()
        self._worker: Worker | None = None
        self._portal: BlockingPortal | None = None
        # Written by the loop only, read by the HTTP thread: each is replaced whole, never
        # mutated, so a reader sees either the old or the new value.
        self._doc: dict[str, Any] = health_document(
            None, pid=self._pid, started_wall=self._started_wall
        )
        self._published_at = self._started
        self._alive_at = self._started
        # systemd state, loop side only.
        self._sent_ready = False
        self._sent_stopping = False
        self._sent_status = ""
        self._pinged_at = -float("inf")
        self._last_error = ""
        self.bound_port = self.port

    def attach(self, worker: Worker) -> None:
        """Show `worker` from the next tick on; call on the event loop."""
        self._worker = worker
        worker.health_port = self.bound_port  # agents get it as MULTICA_DAEMON_PORT
        self.tick()

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, serve from a thread and tick until cancelled; reports the bound port.

        `port = await tg.start(health.serve)`. Raises `AlreadyRunningError` when the address
        is taken, before anything else starts.
        """
        sock = _bind(self.host, self.port)
        port = self.bound_port = int(sock.getsockname()[1])
        http = _HttpServer(sock, self)
        thread = threading.Thread(
            target=http.serve_forever,
            kwargs={"poll_interval": 0.1},
            name="health-port",
            daemon=True,
        )
        try:
            async with BlockingPortal() as portal:
                self._portal = portal
                self.tick()
                thread.start()
                shown = f"[{self.host}]" if ":" in self.host else self.host
                log.info("health port listening on http://%s:%d", shown, port)
                task_status.started(port)
                try:
                    while True:
                        await anyio.sleep(self._tick_every)
                        self.tick()
                finally:
                    self._portal = None
                    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_BOUND):
                        self._notify_stopping()
                        if thread.is_alive():
                            await anyio.to_thread.run_sync(http.shutdown, abandon_on_cancel=True)
        finally:
            http.server_close()
            log.info("health port closed")

    def tick(self) -> None:
        """One loop tick: publish the document, stamp liveness, refresh gauges, tell systemd."""
        now = self._clock()
        self._alive_at = now
        try:
            doc = health_document(self._worker, pid=self._pid, started_wall=self._started_wall)
        except Exception as exc:
            # The health port reports on the daemon; a bug in the report must not stop it.
            # The last good document stays up, its growing snapshot_age_seconds shows it.
            if repr(exc) != self._last_error:
                self._last_error = repr(exc)
                log.exception("health document failed; serving the last one")
            doc = self._doc
        else:
            self._doc = doc
            self._published_at = now
        self._metrics.heartbeat_age.set(doc["last_message_age_seconds"])
        self._notify(doc, now)

    def _notify(self, doc: dict[str, Any], now: float) -> None:
        n = self._notifier
        if not n.enabled:
            return
        status, line = doc["status"], _status_line(doc)
        if status == "running" and not self._sent_ready:
            self._sent_ready = True
            self._sent_status = line
            n.ready(line)
        elif status == "stopping":
            self._notify_stopping()
        if self._sent_ready and line != self._sent_status:
            self._sent_status = line
            n.status(line)
        interval = n.watchdog_interval
        if interval is not None and now - self._pinged_at >= interval:
            self._pinged_at = now
            n.watchdog()

    def _notify_stopping(self) -> None:
        if not self._sent_stopping:
            self._sent_stopping = True
            self._notifier.stopping()

    # --- the HTTP thread's side: reads only the published values -------------------------

    def route(self, method: str, path: str, peer: str) -> Reply:
        """The answer to one request; runs on the HTTP thread."""
        handlers: dict[tuple[str, str], Callable[[], Reply]] = {
            ("GET", "/health"): self._health,
            ("GET", "/healthz"): self._healthz,
            ("GET", "/readyz"): self._readyz,
            ("GET", "/metrics"): self._scrape,
            ("POST", "/shutdown"): lambda: self._shutdown(peer),
        }
        handler = handlers.get((method, path))
        if handler is not None:
            return handler()
        if any(route.endswith(f" {path}") for route in ROUTES):
            return Reply.doc(405, {"error": f"{method} not allowed on {path}"})
        return Reply.doc(404, {"error": f"no route {path}", "routes": list(ROUTES)})

    def _health(self) -> Reply:
        now = self._clock()
        doc = with_uptime(self._doc, now - self._started, now - self._published_at)
        return Reply.doc(200, doc)

    def _healthz(self) -> Reply:
        age = self._clock() - self._alive_at
        if age > self._stale_after:
            reason = f"event loop stalled: no tick for {age:.1f}s (limit {self._stale_after:g}s)"
            return Reply.doc(503, {"status": "stalled", "reason": reason, "loop_age": age})
        return Reply.doc(200, {"status": "ok", "loop_age": round(age, 3)})

    def _readyz(self) -> Reply:
        doc = self._doc
        if not doc["registered"]:
            return Reply.doc(503, {"status": "not_ready", "reason": "not registered yet"})
        if doc["server_circuit"] == "open":
            reason = "server circuit open: the server keeps failing"
            return Reply.doc(503, {"status": "not_ready", "reason": reason})
        return Reply.doc(200, {"status": "ready", "daemon_id": doc["daemon_id"]})

    def _scrape(self) -> Reply:
        return Reply(200, self._metrics.exposition(), METRICS_CONTENT_TYPE)

    def _shutdown(self, peer: str) -> Reply:
        # On Kubernetes the port listens on every interface of the pod; only a process on the
        # same host (or `kubectl exec`) may stop the daemon, never another pod.
        if not _is_loopback(peer):
            return Reply.doc(403, {"error": "shutdown is accepted from loopback clients only"})
        portal = self._portal
        if portal is None:
            return Reply.doc(503, {"error": "the health port is closing"})
        try:
            future = portal.start_task_soon(self._request_stop)
        except RuntimeError:
            return Reply.doc(503, {"error": "the health port is closing"})
        try:
            accepted = future.result(timeout=_HANDOFF_WAIT)
        except FutureTimeout:
            # The loop is busy; the handoff stays queued and runs once it gets a turn.
            return Reply.doc(202, {"status": "stop_queued", "reason": "the event loop is busy"})
        if not accepted:
            return Reply.doc(503, {"error": "the daemon has not started its worker yet"})
        return Reply.doc(202, {"status": "stopping"})

    def _request_stop(self) -> bool:
        """Runs on the event loop (handed over through the portal)."""
        if self._worker is None:
            return False
        log.info("shutdown requested on the health port")
        self._worker.request_stop()
        self.tick()
        return True


def _status_line(doc: dict[str, Any]) -> str:
    """The line `systemctl status` shows."""
    return (
        f"{doc['status']}: {doc['active_task_count']}/{doc['max_concurrent_tasks']} tasks, "
        f"server circuit {doc['server_circuit']}, outbox {doc['outbox_depth']}"
    )


def _is_loopback(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; a taken address means another daemon runs there."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise ConfigError(f"the health port cannot listen on {shown}: {exc}") from exc
    sock = socket.socket(family, kind, proto)
    try:
        # SO_REUSEADDR lets a restart bind despite TIME_WAIT connections; Linux still refuses
        # a second listener on the same address, which is what makes the port a lock.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(64)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise AlreadyRunningError(
                f"another daemon is already running on {shown} (its health port is taken; "
                "stop it, or set MULTICA_DAEMON_HEALTH_ADDR to run a second one)"
            ) from exc
        raise ConfigError(f"the health port cannot listen on {shown}: {exc}") from exc
    return sock


class _HttpServer(ThreadingHTTPServer):
    """The stdlib threading HTTP server on a socket bound beforehand."""

    daemon_threads = True

    def __init__(self, sock: socket.socket, health: HealthServer) -> None:
        # bind_and_activate=False: the socket is already bound (and server_bind would do a
        # reverse DNS lookup of the host, which can hang on a machine without DNS).
        super().__init__(sock.getsockname()[:2], _Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.health = health


class _Handler(BaseHTTPRequestHandler):
    """Parses one request and writes the `HealthServer.route` reply."""

    protocol_version = "HTTP/1.1"
    timeout = 30
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for the
    # client's delayed ACK of the headers, ~40 ms on every request.
    disable_nagle_algorithm = True
    server: _HttpServer

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def _answer(self, method: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            reply = Reply.doc(400, {"error": "bad Content-Length"})
        elif length > _MAX_BODY:
            self.close_connection = True
            reply = Reply.doc(413, {"error": "request body too large"})
        else:
            if length:
                self.rfile.read(length)
            path = self.path.split("?", 1)[0]
            try:
                reply = self.server.health.route(method, path, self.client_address[0])
            except Exception:
                log.exception("health port: %s %s failed", method, path)
                reply = Reply.doc(500, {"error": "internal error"})
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:
        # Every scrape would log a line; errors are logged by route() instead.
        pass
