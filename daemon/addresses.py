"""Network addresses as the daemon reads them: `HOST:PORT` text, loopback hosts, URLs shown."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit


def split_host_port(address: str) -> tuple[str, int]:
    """`("host", port)` from `host:port` or `[v6]:port`; ValueError when it is neither."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bad address {address!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def join_host_port(host: str, port: int) -> str:
    """`host:port`, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    """True for `localhost` and any loopback address (127.0.0.0/8, ::1, ::ffff:127.x.y.z)."""
    host = host.strip("[]")
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def is_ip_address(host: str) -> bool:
    """True for an IPv4 or IPv6 address (brackets allowed), False for a name."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def host_of_header(value: str) -> str:
    """The host part of a `Host` header value (`127.0.0.1:19514`, `[::1]:1`, `localhost`)."""
    value = value.strip()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rpartition(":")[0] if value.count(":") == 1 else value


def without_credentials(url: str) -> str:
    """The URL without `user:password@`: a server URL may carry credentials, logs must not."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def listen(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening TCP socket on host:port (IPv4 or IPv6, whichever the host resolves to)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        # SO_REUSEADDR lets a restart bind despite TIME_WAIT connections; Linux still refuses
        # a second listener on the same address.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock
