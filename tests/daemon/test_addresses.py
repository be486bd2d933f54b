"""Addresses and times as the daemon reads and writes them, each in one place."""

from __future__ import annotations

import pytest

from daemon.addresses import host_of_header, is_loopback, join_host_port, split_host_port
from daemon.times import utc_iso


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:19514", ("127.0.0.1", 19514)), ("[::1]:0", ("::1", 0)), ("h:1", ("h", 1))],
)
def test_host_port_round_trips(text: str, expected: tuple[str, int]) -> None:
    """`HOST:PORT` and `[v6]:PORT` split into host and port, and join back."""
    assert split_host_port(text) == expected
    assert join_host_port(*expected) == text


@pytest.mark.parametrize("text", ["nope", ":80", "h:", "h:x", "h:65536"])
def test_a_bad_address_is_a_value_error(text: str) -> None:
    """Anything but HOST:PORT with a port up to 65535 is refused."""
    with pytest.raises(ValueError, match="HOST:PORT"):
        split_host_port(text)


@pytest.mark.parametrize(
    ("header", "loopback"),
    [
        ("127.0.0.1:19514", True),
        ("[::1]:19514", True),
        ("localhost", True),
        ("[::ffff:127.0.0.1]:1", True),
        ("evil.example:19514", False),
        ("0.0.0.0:19514", False),
        ("10.1.2.3", False),
    ],
)
def test_host_headers_are_loopback_only_for_loopback_names(header: str, loopback: bool) -> None:
    """A Host header names loopback only for localhost and loopback addresses."""
    assert is_loopback(host_of_header(header)) is loopback


def test_utc_times_have_a_z_and_the_precision_asked() -> None:
    """Seconds by default; milliseconds and microseconds on request."""
    assert utc_iso(86400.25) == "1970-01-02T00:00:00Z"
    assert utc_iso(86400.25, "milliseconds") == "1970-01-02T00:00:00.250Z"
    assert utc_iso(86400.25, "microseconds") == "1970-01-02T00:00:00.250000Z"
