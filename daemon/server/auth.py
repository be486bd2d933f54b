"""Who may talk to the reference server: the bearer token, from this host's names, same-origin.

Every request (HTTP and WebSocket) passes four checks, cheapest first, before any route runs:
the `Host` must name this server (a loopback name or address, or the address it listens on) so
a DNS-rebinding page cannot reach it under its own domain; an `Origin`, when sent, must be this
server's own, so no other site's page can drive it from a browser; the bearer token must match;
and a POST body must be declared `application/json`, which a browser cannot send cross-site
without a preflight this server never answers.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from daemon.addresses import is_loopback

WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def _hostname(authority: str) -> str | None:
    """The host part of a `Host` header value (`[::1]:8080` → `::1`), lower-cased; None when
    it cannot be parsed."""
    try:
        return (urlsplit(f"//{authority}").hostname or "").lower()
    except ValueError:
        return None


def _netloc(origin: str) -> str | None:
    """The `host:port` of an `Origin` header value; None when it cannot be parsed."""
    try:
        return urlsplit(origin).netloc.lower()
    except ValueError:
        return None


class RequestGuard:
    """ASGI middleware: Host, Origin, bearer token and POST Content-Type, on every route."""

    def __init__(self, app: ASGIApp, token: str, listen_host: str = "127.0.0.1") -> None:
        if not token:
            raise ValueError("the reference server always needs a token")
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._listen = listen_host.strip("[]").lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refusal = self._refusal(scope)
            if refusal is not None:
                if scope["type"] == "websocket":
                    # Closing before accepting makes the server answer the handshake with 403.
                    await send({"type": "websocket.close", "code": 1008})
                else:
                    await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> JSONResponse | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not self._host_allowed(_hostname(host), scope):
            return _refuse(403, "this server answers only to its own address (Host)")
        origin = headers.get("origin")
        if origin is not None and _netloc(origin) != host.lower():
            return _refuse(403, "cross-origin requests are not accepted")
        given = headers.get("authorization", "").encode()
        # Constant-time comparison: response timing must not reveal the token prefix.
        if not hmac.compare_digest(given, self._expected):
            return _refuse(401, "unauthorized")
        if scope["type"] == "http" and scope["method"] == "POST" and not _json_body(headers):
            return _refuse(415, "a request body must be application/json")
        return None

    def _host_allowed(self, hostname: str | None, scope: Scope) -> bool:
        if hostname is None:
            return False
        if not hostname or is_loopback(hostname) or hostname == self._listen:
            return True
        # Listening on every interface: the address this connection arrived at is ours too.
        # A rebinding page's Host is its own domain name, never an address of this machine.
        local = scope.get("server")
        return self._listen in WILDCARDS and local is not None and hostname == str(local[0])


def _json_body(headers: Headers) -> bool:
    """True when the POST declares a JSON body, or has no body at all (`cancel`, `{}`-less)."""
    kind = headers.get("content-type")
    if kind is None:
        return headers.get("content-length", "0") == "0" and "transfer-encoding" not in headers
    media = kind.split(";", 1)[0].strip().lower()
    return media == "application/json"


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
