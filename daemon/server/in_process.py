"""What a daemon running the reference server in its own process shares with it.

The hub tells the daemon at once that a task was queued or cancelled (no control socket), and
the app, once served, answers the daemon's requests through httpx's ASGI transport (no HTTP
socket). The listening socket stays for everyone else: `submit`, other daemons, the browser.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
from starlette.types import ASGIApp

from daemon.server.control import ControlHub


@dataclass
class InProcess:
    """The embedded server's hub, and its app once `serve` built it."""

    hub: ControlHub = field(default_factory=ControlHub)
    app: ASGIApp | None = None

    def transport(self) -> httpx.AsyncBaseTransport:
        """A transport that hands each request to the app in this process."""
        if self.app is None:
            raise RuntimeError("the embedded server is not serving yet")
        # The Host the client sends is its base URL's (127.0.0.1:PORT), which the guard accepts.
        # An unexpected error is answered 500, as over a socket, instead of raised in the
        # daemon: the app's catch-all handler answers it and then re-raises it for the server.
        return httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
