"""The daemon's httpx client: the protocol's headers and timeouts over the HTTP/1.1 transport
(transport.py), a pool sized for the tasks it runs, no cookie jar, each request handed straight
to the transport."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from daemon.protocol.answers import ACCEPT_ENCODING
from daemon.protocol.transport import Http1Transport
from daemon.protocol.wire import protocol_headers

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
REQUESTS_PER_TASK = 2
"""What one running task can have on its way at once: a transcript batch (one at a time) and
a status poll."""
SHARED_CONNECTIONS = 16
"""Room for what no task sends: claims, heartbeats of every runtime, pending-action results."""
KEEPALIVE_EXPIRY = 4.0
"""Less than the 5 s after which uvicorn (and other servers) close an idle connection: a
request written into a connection the server closes at that moment is lost, and whether it
was read is then in doubt."""


def pool_limits(tasks: int) -> httpx.Limits:
    """Connections for a daemon running up to `tasks` at once: as many as its requests can be
    on their way together, so none waits for one, each kept alive while reused.

    The pool opens a connection only when no idle one is free, so it grows with what is sent
    at once, never past this bound. A server a round trip away holds a connection a round
    trip per request: a fixed 16 carried at most 16 requests a round trip, at 100 ms 160 a
    second against the ~240 that 200 tasks send at a line a second (a batch a second each, a
    poll every 5 s), and the backlog grew without end (bench_load 200x1 --delay 100ms --tls:
    147 requests a second, all 16 busy and 220 waiting, lag p95 4.4 s; sized so, 244 a second,
    about 40 in flight, p95 0.7 s). Idle ones are all kept (until KEEPALIVE_EXPIRY): a new TLS
    connection costs both ends CPU and a client two or three round trips."""
    connections = REQUESTS_PER_TASK * tasks + SHARED_CONNECTIONS
    return httpx.Limits(
        max_connections=connections,
        max_keepalive_connections=connections,
        keepalive_expiry=KEEPALIVE_EXPIRY,
    )


DEFAULT_TASKS = 20
"""The pool's size when the caller does not say how many tasks run (the daemon's default)."""


def make_http_client(
    base_url: str,
    token: str,
    version: str,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    tasks: int = DEFAULT_TASKS,
) -> httpx.AsyncClient:
    """An httpx client with the protocol's headers and timeouts over the HTTP/1.1 transport
    (transport.py), its pool sized for `tasks` running at once (`pool_limits`); `transport`
    replaces it (the in-process embedded server, tests)."""
    return ProtocolClient(
        transport or Http1Transport(pool_limits(tasks)),
        base_url=base_url.rstrip("/"),
        headers={**protocol_headers(token, version), "Accept-Encoding": ACCEPT_ENCODING},
        timeout=httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT),
    )


class _NoCookies(httpx.Cookies):
    """A cookie jar that keeps nothing: the protocol sets no cookies."""

    def extract_cookies(self, response: httpx.Response) -> None:
        del response


class ProtocolClient(httpx.AsyncClient):
    """httpx's client as the daemon builds it: one transport, no cookie jar, no auth, no
    redirects, no event hooks; each request goes straight to the transport.

    httpx copies every answer's request and headers into urllib's shapes to look for cookies
    (`Cookies.extract_cookies`): a sixth of a request's CPU in the daemon, for nothing."""

    def __init__(
        self,
        transport: httpx.AsyncBaseTransport,
        *,
        base_url: str,
        headers: Mapping[str, str],
        timeout: httpx.Timeout,
    ) -> None:
        # Not trusting the environment: no proxy mounts in front of `transport`. The daemon's
        # transport routes proxied origins itself (HTTP(S)_PROXY, NO_PROXY; transport.py).
        super().__init__(
            transport=transport,
            trust_env=False,
            base_url=base_url,
            headers=headers,
            timeout=timeout,
        )
        self._cookies = _NoCookies()
        self._transport_direct = transport

    @property
    def direct(self) -> Http1Transport | None:
        """The daemon's own transport, which a caller may hand a request to without building
        an `httpx.Request` (`Http1Transport.exchange`); None once closed, or for another."""
        transport = self._transport_direct
        if self.is_closed or not isinstance(transport, Http1Transport):
            return None
        return transport

    async def send(
        self,
        request: httpx.Request,
        *,
        stream: bool = False,
        auth: Any = httpx.USE_CLIENT_DEFAULT,
        follow_redirects: Any = httpx.USE_CLIENT_DEFAULT,
    ) -> httpx.Response:
        """`request` answered by the transport itself.

        What `AsyncClient.send` adds around its transport (auth, redirects, cookies, event
        hooks, proxy mounts) this client has none of, and it ties each answer to its stream
        in a reference cycle: about 20 objects a request that only the garbage collector
        frees, 5,000 a second at 200 tasks. Over a transport answering from memory `send`
        took 35 µs a request, the transport alone 17 µs. A closed client, or a call asking
        for auth or redirects, still goes through httpx's `send`."""
        if self.is_closed or (auth, follow_redirects) != (
            httpx.USE_CLIENT_DEFAULT,
            httpx.USE_CLIENT_DEFAULT,
        ):
            return await super().send(
                request, stream=stream, auth=auth, follow_redirects=follow_redirects
            )
        response = await self._transport_direct.handle_async_request(request)
        response.request = request  # as `send` does: a transport need not set it
        if not stream:
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
        return response


def request_budget(http: httpx.AsyncClient) -> float:
    """The longest one request through `http` can take: connect, write and read timeouts."""
    timeout = http.timeout
    parts = (timeout.connect, timeout.write, timeout.read)
    return sum(READ_TIMEOUT if part is None else part for part in parts)
