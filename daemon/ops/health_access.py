"""Who may read what on the health port: only requests addressed to an address or this
machine's names (a DNS-rebinding page reaches the port under its own domain), and the full
`/health` (ids, pids, the server URL, workspace names) only with the daemon's token or a proof
that the caller holds it.

`agent-daemon status` proves it without sending anything a listener could use again: it asks
`GET /health/challenge` for a nonce, then sends `Authorization: Proof <nonce> <mac>`, the mac
an HMAC of the nonce, method and path under the token. A nonce is the port's own, random,
good for one request within `NONCE_TTL` seconds: a proof overheard (a neighbour squatting on
the address while the daemon is down, a mistyped `--addr`) is refused when replayed, and one
made for `/health` proves nothing elsewhere. What a challenge cannot stop is a listener that
relays the exchange as it happens; `status` refuses to send a proof to a loopback port that
another user holds (daemon/cli/port_owner.py), which is where a relay would sit.

Chosen over a root-only Unix socket checked with `SO_PEERCRED`: the health port is already the
daemon's one listener (its threads, connection bounds and deadlines), reached the same way from
the host, from `docker exec` and from a Kubernetes probe; a second listener would double that
surface for one command. The token itself still reads the full view (`Authorization: Bearer`),
as Prometheus-style callers holding it are told in the README.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from daemon.addresses import host_of_header, is_ip_address, is_loopback

CHALLENGE_PATH = "/health/challenge"
"""Where `agent-daemon status` gets a nonce to prove it holds the token."""
PROOF_SCHEME = "Proof"
NONCE_TTL = 10.0
"""Seconds a nonce may wait for its proof (`status` sends it at once)."""
MAX_NONCES = 256
"""Nonces outstanding at most: a flood of challenges evicts the oldest, costing no memory."""


def proof(token: str, nonce: str, method: str, path: str) -> str:
    """The mac `status` sends for one request: the token's HMAC of the nonce and the request."""
    message = f"{nonce}\n{method} {path}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def proof_header(token: str, nonce: str, method: str, path: str) -> str:
    """The `Authorization` value that proves holding `token` for one request."""
    return f"{PROOF_SCHEME} {nonce} {proof(token, nonce, method, path)}"


class Challenges:
    """The nonces this port handed out and no request has used yet; request threads share it."""

    def __init__(
        self,
        *,
        ttl: float = NONCE_TTL,
        limit: int = MAX_NONCES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._expiry: OrderedDict[str, float] = OrderedDict()

    def issue(self) -> str:
        """A fresh nonce, good for one proof within the ttl."""
        nonce = secrets.token_hex(16)
        with self._lock:
            now = self._clock()
            while self._expiry and (
                len(self._expiry) >= self._limit or next(iter(self._expiry.values())) < now
            ):
                self._expiry.popitem(last=False)
            self._expiry[nonce] = now + self._ttl
        return nonce

    def redeem(self, nonce: str) -> bool:
        """Whether `nonce` was issued here and is still good; it is spent either way."""
        with self._lock:
            expiry = self._expiry.pop(nonce, None)
        return expiry is not None and self._clock() <= expiry

    @property
    def ttl(self) -> float:
        """Seconds a nonce stays good."""
        return self._ttl


def host_allowed(host: str | None, configured: str) -> bool:
    """No Host (HTTP/1.0 probes), an IP address, `localhost`, or the port's configured host."""
    if host is None:
        return True
    name = host_of_header(host).lower()
    return is_ip_address(name) or is_loopback(name) or name == configured.lower()


def bears_token(headers: Mapping[str, str], token: str) -> bool:
    """Whether the request's `Authorization: Bearer ...` is `token` (never, with no token)."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


def proves_token(
    headers: Mapping[str, str], token: str, challenges: Challenges, method: str, path: str
) -> bool:
    """Whether the request carries a proof of `token` over a nonce this port issued and no
    request has used (spent now, whatever the mac), made for this method and path."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if not token or scheme.lower() != PROOF_SCHEME.lower():
        return False
    nonce, _, mac = value.strip().partition(" ")
    if not nonce or not challenges.redeem(nonce):
        return False
    expected = proof(token, nonce, method, path)
    return hmac.compare_digest(mac.strip().encode(), expected.encode())
