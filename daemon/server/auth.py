"""Who may talk to the reference server: one bearer token, or loopback clients without one."""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from daemon.addresses import is_loopback


class BearerAuth:
    """ASGI middleware: with a token, every request must carry it; without, loopback only."""

    def __init__(self, app: ASGIApp, token: str = "") -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode() if token else b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> JSONResponse | None:
        if self._expected:
            given = Headers(scope=scope).get("authorization", "").encode()
            # Constant-time comparison: response timing must not reveal the token prefix.
            if hmac.compare_digest(given, self._expected):
                return None
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        client = scope.get("client")
        if client is None or is_loopback(str(client[0])):
            return None
        return JSONResponse(
            {"error": "this server has no token and accepts loopback clients only"},
            status_code=403,
        )
