"""Who may read what on the health port: only requests addressed to an address or this
machine's names (a DNS-rebinding page reaches the port under its own domain), and the full
`/health` (ids, pids, the server URL, workspace names) only with the daemon's token or the view
key made from it (`agent-daemon status` sends the key, never the token)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from daemon.addresses import host_of_header, is_ip_address, is_loopback


def view_key(token: str) -> str:
    """What `agent-daemon status` sends for the full view: made from the daemon's token but
    useless as one, so a process squatting on the health port while the daemon is down
    learns nothing it could take to the server."""
    return hmac.new(token.encode(), b"agent-daemon health view", hashlib.sha256).hexdigest()


def host_allowed(host: str | None, configured: str) -> bool:
    """No Host (HTTP/1.0 probes), an IP address, `localhost`, or the port's configured host."""
    if host is None:
        return True
    name = host_of_header(host).lower()
    return is_ip_address(name) or is_loopback(name) or name == configured.lower()


def bears_token(headers: Mapping[str, str], token: str) -> bool:
    """Whether the request's `Authorization: Bearer ...` is `token` or its view key (never,
    with no token)."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    value = value.strip()
    return any(
        hmac.compare_digest(value.encode(), known.encode()) for known in (token, view_key(token))
    )
