"""systemd `Type=notify` support: sd_notify(3) datagrams over a unix socket, no dependency.

The protocol is one datagram of newline-separated `KEY=value` lines sent to the socket named
by `NOTIFY_SOCKET` (a path, or `@name` for the abstract namespace). Outside systemd the
variable is unset and every call is a no-op, so callers never check.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

# systemd's notify protocol variables. Agents must not inherit them: an agent that wrote
# READY=1 or WATCHDOG=1 to the socket would speak for the daemon (NotifyAccess=main rejects
# it, but other units may be configured with `all`).
NOTIFY_ENV_VARS: tuple[str, ...] = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


class Notifier:
    """Sends readiness, status and watchdog pings to systemd; silent when not under systemd."""

    def __init__(
        self,
        address: str | None,
        watchdog_usec: int | None = None,
        watchdog_pid: int | None = None,
        pid: int | None = None,
    ) -> None:
        self._address = _socket_address(address)
        self._watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None
        self._watchdog_pid = watchdog_pid
        self._pid = os.getpid() if pid is None else pid

    @classmethod
    def from_env(cls, environ: Mapping[str, str], pid: int | None = None) -> Notifier:
        """Build from `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` in `environ`."""
        return cls(
            environ.get("NOTIFY_SOCKET"),
            watchdog_usec=_int_or_none(environ.get("WATCHDOG_USEC")),
            watchdog_pid=_int_or_none(environ.get("WATCHDOG_PID")),
            pid=pid,
        )

    @property
    def enabled(self) -> bool:
        """True when a notify socket is configured."""
        return self._address is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between WATCHDOG=1 pings (half the timeout), or None when not asked for."""
        if self._address is None or self._watchdog_usec is None:
            return None
        # systemd sets WATCHDOG_PID so a forked child that inherited the variables knows the
        # watchdog is not its business.
        if self._watchdog_pid is not None and self._watchdog_pid != self._pid:
            return None
        return self._watchdog_usec / 2_000_000

    def ready(self, status: str = "running") -> bool:
        """Tell systemd start-up is complete (READY=1) with a status line."""
        return self.notify("READY=1", f"STATUS={_one_line(status)}")

    def stopping(self, status: str = "stopping") -> bool:
        """Tell systemd the daemon is shutting down (STOPPING=1) with a status line."""
        return self.notify("STOPPING=1", f"STATUS={_one_line(status)}")

    def status(self, text: str) -> bool:
        """Set the free-form status `systemctl status` shows."""
        return self.notify(f"STATUS={_one_line(text)}")

    def watchdog(self) -> bool:
        """Ping the service watchdog; call only while the daemon is healthy."""
        return self.notify("WATCHDOG=1")

    def notify(self, *lines: str) -> bool:
        """Send one datagram of `KEY=value` lines; True if sent, never raises."""
        if self._address is None:
            return False
        payload = "\n".join(lines).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                # Non-blocking: a full receive queue in PID 1 must never stall the event loop.
                sock.setblocking(False)
                sock.sendto(payload, self._address)
        except OSError as exc:
            log.debug("sd_notify %r failed: %s", lines, exc)
            return False
        return True


def _socket_address(raw: str | None) -> str | bytes | None:
    if not raw:
        return None
    if raw.startswith("@"):
        # Abstract namespace: '@' stands for the leading NUL byte.
        return b"\0" + raw[1:].encode()
    if raw.startswith("/"):
        return raw
    log.debug("NOTIFY_SOCKET=%r is not a unix socket path; notifications disabled", raw)
    return None


def _int_or_none(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None


def _one_line(text: str) -> str:
    # A newline would start a new KEY=value assignment in the datagram.
    return " ".join(text.split())


class ServiceState:
    """What the daemon told systemd, sent from the health port's ticks: READY=1 once the
    daemon runs, a STATUS= line when it changes, WATCHDOG=1 each half timeout, STOPPING=1 once."""

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier
        self._sent_ready = False
        self._sent_stopping = False
        self._sent_status = ""
        self._pinged_at = -float("inf")

    @property
    def awaiting_ready(self) -> bool:
        """Whether systemd waits for READY=1 (every tick builds a document until it is sent)."""
        return self.notifier.enabled and not self._sent_ready

    def tell(self, doc: Mapping[str, Any], now: float) -> None:
        """Tell systemd what the health document `doc` says, at `now` (monotonic seconds)."""
        n = self.notifier
        if not n.enabled:
            return
        stage, line = doc["stage"], status_line(doc)
        if stage == "running" and not self._sent_ready:
            self._sent_ready = True
            self._sent_status = line
            n.ready(line)
        elif stage == "stopping":
            self.stopping()
        if self._sent_ready and line != self._sent_status:
            self._sent_status = line
            n.status(line)
        interval = n.watchdog_interval
        if interval is not None and now - self._pinged_at >= interval:
            self._pinged_at = now
            n.watchdog()

    def stopping(self) -> None:
        """STOPPING=1, once."""
        if not self._sent_stopping:
            self._sent_stopping = True
            self.notifier.stopping()


def status_line(doc: Mapping[str, Any]) -> str:
    """The line `systemctl status` shows for a health document."""
    return (
        f"{doc['stage']}: {doc['active_task_count']}/{doc['max_concurrent_tasks']} tasks, "
        f"server circuit {doc['server_circuit']}, outbox {doc['outbox_depth']}"
    )
