"""sd_notify datagrams reach real unix sockets; the watchdog interval follows systemd's rules."""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.ops.sdnotify import Notifier


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Short path: sun_path holds only 108 bytes and pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="sdn-", dir="/tmp") as name:
        yield Path(name)


@pytest.fixture
def path_socket(socket_dir: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(socket_dir / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(5)
        yield path, sock


@pytest.fixture
def abstract_socket() -> Iterator[tuple[str, socket.socket]]:
    name = f"agent-daemon-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(5)
        yield "@" + name, sock


def _lines(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


def test_ready_sends_ready_and_status_to_a_path_socket(
    path_socket: tuple[str, socket.socket],
) -> None:
    """ready() sends READY=1 with a STATUS line in one datagram to a filesystem socket."""
    path, sock = path_socket
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path})
    assert notifier.ready("registered as d-1, 2 backends")
    assert _lines(sock) == ["READY=1", "STATUS=registered as d-1, 2 backends"]


def test_watchdog_ping_reaches_an_abstract_socket(
    abstract_socket: tuple[str, socket.socket],
) -> None:
    """An `@name` NOTIFY_SOCKET is the abstract namespace; WATCHDOG=1 arrives there."""
    address, sock = abstract_socket
    notifier = Notifier.from_env({"NOTIFY_SOCKET": address})
    assert notifier.watchdog()
    assert _lines(sock) == ["WATCHDOG=1"]


def test_stopping_and_status_messages(path_socket: tuple[str, socket.socket]) -> None:
    """stopping() sends STOPPING=1 with a status; status() sends only STATUS."""
    path, sock = path_socket
    notifier = Notifier.from_env({"NOTIFY_SOCKET": path})
    notifier.stopping("draining 3 tasks")
    notifier.status("1 task running")
    assert _lines(sock) == ["STOPPING=1", "STATUS=draining 3 tasks"]
    assert _lines(sock) == ["STATUS=1 task running"]


def test_status_text_is_kept_on_one_line(path_socket: tuple[str, socket.socket]) -> None:
    """A newline in a status cannot inject another KEY=value assignment."""
    path, sock = path_socket
    Notifier.from_env({"NOTIFY_SOCKET": path}).status("oops\nREADY=1")
    assert _lines(sock) == ["STATUS=oops READY=1"]


def test_without_notify_socket_every_call_is_a_noop() -> None:
    """With NOTIFY_SOCKET unset nothing is sent and nothing is asked of the caller."""
    notifier = Notifier.from_env({"WATCHDOG_USEC": "60000000"})
    assert not notifier.enabled
    assert notifier.ready() is False
    assert notifier.watchdog() is False
    assert notifier.watchdog_interval is None


def test_send_failure_is_logged_at_debug_and_not_raised(
    socket_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A socket that is gone (systemd restarted) makes notify return False, not raise."""
    notifier = Notifier.from_env({"NOTIFY_SOCKET": str(socket_dir / "missing")})
    with caplog.at_level(logging.DEBUG, logger="daemon.ops.sdnotify"):
        assert notifier.ready() is False
    assert any("sd_notify" in r.getMessage() for r in caplog.records)


def test_non_socket_address_disables_notifications() -> None:
    """An address that is neither a path nor `@name` disables the notifier."""
    assert not Notifier.from_env({"NOTIFY_SOCKET": "vsock:2:1234"}).enabled


def test_watchdog_interval_is_half_the_timeout() -> None:
    """WATCHDOG_USEC=60s without WATCHDOG_PID means a ping every 30 s."""
    notifier = Notifier.from_env({"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "60000000"})
    assert notifier.watchdog_interval == 30.0


def test_watchdog_interval_when_watchdog_pid_is_us() -> None:
    """WATCHDOG_PID naming this process keeps the watchdog on."""
    env = {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "5000000", "WATCHDOG_PID": str(os.getpid())}
    assert Notifier.from_env(env).watchdog_interval == 2.5


def test_watchdog_interval_none_when_watchdog_pid_is_another_process() -> None:
    """A process that inherited WATCHDOG_* from its parent must not ping."""
    env = {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "5000000", "WATCHDOG_PID": "1"}
    assert Notifier.from_env(env, pid=4242).watchdog_interval is None


@pytest.mark.parametrize("usec", [None, "", "0", "soon", "-5"])
def test_watchdog_interval_none_when_unset_or_invalid(usec: str | None) -> None:
    """No usable WATCHDOG_USEC means no watchdog pings."""
    env = {"NOTIFY_SOCKET": "/run/x"}
    if usec is not None:
        env["WATCHDOG_USEC"] = usec
    assert Notifier.from_env(env).watchdog_interval is None
