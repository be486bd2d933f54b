"""Who holds a loopback TCP port: the uid the kernel lists for its listening socket.

`agent-daemon status` asks this before it proves anything to a port: a neighbour that bound
the health address while the daemon was down (or the address a mistyped `--addr` names) would
otherwise hear the proof, and could relay the exchange to the real daemon as it happens.
`/proc/net/tcp` and `/proc/net/tcp6` list every socket of this network namespace with its
owner's uid, readable by every user; a listening one (state `0A`) on the port, bound to the
address or to its family's wildcard, is what a connection there reaches.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import struct
from collections.abc import Collection
from pathlib import Path

_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_LISTEN = "0A"
_WILDCARDS = (ipaddress.ip_address("0.0.0.0"), ipaddress.ip_address("::"))


def listeners(host: str, port: int, tables: Collection[Path] = _TABLES) -> list[int] | None:
    """The uids of the sockets listening where a connection to `host:port` would land (the
    address, a wildcard, or an IPv4 address's mapped form on an IPv6 socket); None when no
    table can be read (not Linux)."""
    wanted = _addresses(host)
    found: list[int] = []
    read_any = False
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        read_any = True
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != _LISTEN:
                continue
            address, _, hex_port = fields[1].partition(":")
            if int(hex_port, 16) != port:
                continue
            bound = _address(address)
            if bound in wanted or bound in _WILDCARDS:
                found.append(int(fields[7]))
    return found if read_any else None


def expected_owners(state_dir: Path) -> frozenset[int]:
    """Whose port `status` may prove the token to: root, this user, and the owner of the
    daemon's state directory (where its token lives), when there is one."""
    owners = {0, os.geteuid()}
    with contextlib.suppress(OSError):
        owners.add(os.stat(state_dir).st_uid)
    return frozenset(owners)


def refusal(host: str, port: int, owners: Collection[int]) -> str | None:
    """Why `status` must send nothing to `host:port`, or None: another user listens there,
    or nothing does (a neighbour could bind it between now and the connect)."""
    uids = listeners(host, port)
    if uids is None:
        return None
    if not uids:
        return f"nothing answers on {host}:{port} (is the daemon running?)"
    strangers = sorted(set(uids) - set(owners))
    if strangers:
        allowed = ", ".join(str(uid) for uid in sorted(owners))
        return (
            f"{host}:{port} is held by uid {strangers[0]}, not the daemon's user "
            f"(uid {allowed}): not asking it"
        )
    return None


def _addresses(host: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """`host` as the addresses a connection may try, IPv4 ones also in their mapped form."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return set()
    found: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        found.add(address)
        if isinstance(address, ipaddress.IPv4Address):
            found.add(ipaddress.IPv6Address(f"::ffff:{address}"))
    return found


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """A `/proc/net/tcp{,6}` address: 32-bit words in the machine's byte order, in hex."""
    words = [int(text[i : i + 8], 16) for i in range(0, len(text), 8)]
    raw = b"".join(struct.pack("=I", word) for word in words)
    return ipaddress.ip_address(raw)
