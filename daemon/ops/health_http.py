"""The health port's HTTP transport: bounded connections, a deadline per request, one thread.

One thread accepts connections and reads each request's head itself (non-blocking, through a
selector), so an idle or trickling client costs a file descriptor, never a thread. A request
whose head is complete goes to a short-lived thread of its own, which reads the body and
answers. At most `max_connections` are open at once: past that, the oldest connection whose
route is not at work (still sending its head or body, or being answered) is closed to make
room, since a real probe sends its whole request at once and so a flood of unfinished requests
cannot keep `/healthz` out. A route at work holds its slot, but routes on methods other than
`GET` may hold all slots but a reserve, so probes always find one. A connection older than
`deadline` is closed whatever it is doing, unless its route is at work, which may take up to
`answer_deadline` (a repository checkout runs git). A body cut short, by the client or by the
deadline, is answered 400 and never reaches the route. The answer is one request per
connection (`Connection: close`), so the deadline is per request.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from daemon.addresses import join_host_port, listen
from daemon.errors import AlreadyRunningError, ConfigError
from daemon.ops.health_request import Route, answer

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
"""Open connections the health port holds at most; the oldest unfinished request makes room."""
PROBE_RESERVE_SHARE = 8
"""One slot in this many is kept for `GET`s: routes at work on other methods never take it."""
REQUEST_DEADLINE = 10.0
"""Seconds a connection may take from accept to the end of its answer."""
ANSWER_DEADLINE = 330.0
"""Seconds from accept a request whose body is in may take (Multica's CLI waits 5 minutes)."""
_HEAD_LIMIT = 70 * 1024
"""Bytes of request head read before the handler judges it (it answers 414/431 past its limits)."""
_SELECT_TICK = 0.1
_FD_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; a taken address means another daemon runs there."""
    shown = join_host_port(host, port)
    try:
        return listen(host, port)
    except OSError as exc:
        # Linux refuses a second listener on one address: that makes the port a lock.
        if exc.errno == errno.EADDRINUSE:
            raise AlreadyRunningError(
                f"another daemon is already running on {shown} (its health port is taken; "
                "stop it, or set MULTICA_DAEMON_HEALTH_ADDR to run a second one)"
            ) from exc
        raise ConfigError(f"the health port cannot listen on {shown}: {exc}") from exc


Stage = Literal["head", "body", "working", "written"]
"""Where a request is: its head read by the port's thread, its body read by its own thread,
its route at work, its answer written. Only `working` holds a slot against newcomers."""


@dataclass(eq=False, slots=True)
class _Connection:
    sock: socket.socket
    peer: str
    opened: float
    ends: float
    head: bytearray = field(default_factory=bytearray)
    stage: Stage = "head"
    method: str = ""


@dataclass(frozen=True, slots=True)
class PortStatistics:
    """How many connections the health port holds now, and how many of them are where."""

    open_connections: int
    reading_bodies: int
    at_work: int


class HttpPort:
    """Serves `route` on a bound socket from one thread until `stop()`."""

    def __init__(
        self,
        sock: socket.socket,
        route: Route,
        *,
        max_connections: int = MAX_CONNECTIONS,
        deadline: float = REQUEST_DEADLINE,
        answer_deadline: float = ANSWER_DEADLINE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listener = sock
        self._route = route
        self._max = max_connections
        self._probe_reserve = max(1, max_connections // PROBE_RESERVE_SHARE)
        self.deadline = deadline
        self.answer_deadline = max(deadline, answer_deadline)
        self._clock = clock
        self._lock = threading.Lock()
        self._open: dict[socket.socket, _Connection] = {}  # oldest first
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="health-port", daemon=True)
        self._fd_error_logged = 0.0

    def start(self) -> None:
        """Begin accepting connections."""
        self._listener.setblocking(False)
        self._thread.start()

    def stop(self, wait: float = 5.0) -> None:
        """Stop accepting, close every connection and the socket; blocks up to `wait` seconds."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(wait)
        with self._lock:
            for conn in list(self._open.values()):
                self._end(conn)
        self._listener.close()

    def statistics(self) -> PortStatistics:
        """A snapshot of the connections held (a request's connection counts until closed)."""
        with self._lock:
            stages = [c.stage for c in self._open.values()]
        return PortStatistics(len(stages), stages.count("body"), stages.count("working"))

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            while not self._stopping.is_set():
                ready = selector.select(_SELECT_TICK)
                # Heads first, one accept after: a connection whose request has arrived is
                # never the one an accept pushes out.
                for key, _ in ready:
                    if key.fileobj is not self._listener:
                        self._read_head(selector, key.data)
                if any(key.fileobj is self._listener for key, _ in ready):
                    self._accept(selector)
                self._expire(selector)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            sock, address = self._listener.accept()
        except BlockingIOError:
            return
        except OSError as exc:
            # Out of file descriptors (this process or the system): make room if possible,
            # else let the listen queue hold the client a moment; never end the thread.
            if exc.errno not in _FD_ERRORS:
                log.warning("health port: accept failed: %s", exc)
            else:
                self._log_fd_error(exc)
                if not self._make_room(selector):
                    time.sleep(_SELECT_TICK)
            return
        opened = self._clock()
        conn = _Connection(sock, str(address[0]), opened, opened + self.deadline)
        with self._lock:
            full = len(self._open) >= self._max
        if full and not self._make_room(selector):
            sock.close()  # every slot is a route at work: refuse this one
            return
        sock.setblocking(False)
        with self._lock:
            self._open[sock] = conn
        selector.register(sock, selectors.EVENT_READ, conn)

    def _make_room(self, selector: selectors.BaseSelector) -> bool:
        """Close the oldest connection whose route is not at work; False when there is none.

        A request still sending its head or its body holds nothing anyone waits for: 64
        clients each sending a whole head that announces a body, and then nothing, used to
        hold every slot until the deadline, and Kubernetes restarted a healthy daemon.
        """
        with self._lock:
            oldest = next((c for c in self._open.values() if c.stage != "working"), None)
            if oldest is None:
                return False
            self._evict(selector, oldest)
        return True

    def _read_head(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
        try:
            chunk = conn.sock.recv(16384)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        with self._lock:
            if conn.sock not in self._open:  # pushed out meanwhile
                return
            if not chunk:
                self._evict(selector, conn)
                return
        conn.head += chunk
        if b"\r\n\r\n" not in conn.head and len(conn.head) < _HEAD_LIMIT:
            return
        selector.unregister(conn.sock)
        with self._lock:
            conn.stage = "body"  # from here the request's own thread owns the socket
        try:
            threading.Thread(
                target=self._answer, args=(conn,), name="health-request", daemon=True
            ).start()
        except RuntimeError as exc:  # no thread to be had: this request is refused
            log.warning("health port: cannot answer a request: %s", exc)
            self._release(conn)

    def _answer(self, conn: _Connection) -> None:
        try:
            remaining = conn.ends - self._clock()
            conn.sock.settimeout(max(0.01, remaining))
            answer(conn.sock, bytes(conn.head), conn.peer, self._route, _Progress(self, conn))
        except Exception as exc:  # a broken connection is that client's problem only
            log.debug("health port: request from %s ended: %r", conn.peer, exc)
        finally:
            self._release(conn)

    def body_in(self, conn: _Connection, method: str) -> bool:
        """`conn`'s request is whole: True when its route may run now (up to the answer
        deadline); False when the connection was pushed out, or when every slot but the
        probes' reserve already holds a route at work and this one is not a `GET`."""
        with self._lock:
            if conn.sock not in self._open:
                return False
            if method != "GET":
                at_work = sum(
                    1 for c in self._open.values() if c.stage == "working" and c.method != "GET"
                )
                if at_work >= self._max - self._probe_reserve:
                    return False
            conn.stage, conn.method = "working", method
            conn.ends = conn.opened + self.answer_deadline
            return True

    def answered(self, conn: _Connection) -> None:
        """`conn`'s route is done: writing its answer holds no slot against newcomers."""
        with self._lock:
            conn.stage = "written"

    def _expire(self, selector: selectors.BaseSelector) -> None:
        now = self._clock()
        with self._lock:
            for conn in [c for c in self._open.values() if c.ends < now]:
                if conn.stage == "working":
                    _cut(conn.sock)  # the route's thread closes it once the route returns
                else:
                    self._evict(selector, conn)

    def _end(self, conn: _Connection) -> None:
        """End `conn` at stop (the lock held): the port's own are closed, the others cut."""
        if conn.stage == "head":
            self._open.pop(conn.sock, None)
            conn.sock.close()
        else:
            _cut(conn.sock)

    def _evict(self, selector: selectors.BaseSelector, conn: _Connection) -> None:
        """Free `conn`'s slot (the lock held): a socket the port's thread reads is closed; one
        a request thread owns is cut, and that thread, woken with an EOF, closes it."""
        self._open.pop(conn.sock, None)
        if conn.stage == "head":
            selector.unregister(conn.sock)
            _cut(conn.sock)
            conn.sock.close()
        else:
            _cut(conn.sock)

    def _release(self, conn: _Connection) -> None:
        """A request thread is done with `conn`: its slot is free and its socket closed."""
        with self._lock:
            self._open.pop(conn.sock, None)
        _cut(conn.sock)
        conn.sock.close()

    def _log_fd_error(self, exc: OSError) -> None:
        now = self._clock()
        if now - self._fd_error_logged >= 10.0:
            self._fd_error_logged = now
            log.error("health port: out of file descriptors (%s); closing idle connections", exc)


@dataclass(frozen=True, slots=True)
class _Progress:
    """What a request thread tells the port about its connection (see `Progress`)."""

    port: HttpPort
    conn: _Connection

    def body_in(self, method: str) -> bool:
        return self.port.body_in(self.conn, method)

    def answered(self) -> None:
        self.port.answered(self.conn)


def _cut(sock: socket.socket) -> None:
    """Shut both directions: a thread blocked reading `sock` wakes at once."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
