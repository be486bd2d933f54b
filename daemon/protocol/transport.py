"""The HTTP transport under the daemon's httpx client: HTTP/1.1 with keep-alive connections.

Every running task sends its transcript each 500 ms and its status each 5 s (Multica's pace),
so what one request costs in CPU bounds how many tasks a daemon runs. Measured on this
project's 2-core test machine against the Multica-faithful server (tests/benchmarks/
bench_request.py: process CPU per request, median of 3 alternating runs), paced like the
daemon (20 tasks, a 5-message batch each 500 ms): about 1 ms through httpcore (httpx's own
transport), 0.8 ms through aiohttp's pool and C parser, 0.55 ms through this transport — of
which about 0.2 ms is httpx's client and the daemon's caller around it, and most of the rest
the stream (anyio's then) and the socket calls of one exchange (one `send` of head and body,
one read of a small answer). One request right after another costs about 0.4 ms through either
of the last two. The daemon keeps httpx's API — its client, errors, timeouts, and test transports
(`httpx.MockTransport`, respx) — and only the bytes go through here (wire format: http1.py;
keep-alive: pool.py, connection.py). The daemon's own calls skip httpx's request and response
objects too (`exchange`, an `answers.Answer` back): 467 against 371 µs a paced request, 390
against 311 a status poll one after another (bench_request, medians of three alternating
runs). Each connection is read by its own asyncio protocol rather than an anyio stream
(connection.py): at 200 tasks the daemon's CPU went from 18.9 to 16.6 % of a core (bench_load
200x1, four alternating runs).

Failures keep whether the request may have reached the server (exchange.py): a connection that
cannot be made is `ConnectError`/`ConnectTimeout`, one the pool cannot give `PoolTimeout`.
"""

from __future__ import annotations

import ssl
import time
import urllib.request

import anyio
import httpx

from daemon.protocol.answers import Answer
from daemon.protocol.connection import Connection, connect
from daemon.protocol.exchange import AnswerBody, exchange
from daemon.protocol.http1 import AnswerHead, request_head
from daemon.protocol.pool import ConnectionPool, Origin

_PORTS = {"http": 80, "https": 443}
_Route = tuple[Origin, httpx.AsyncBaseTransport | None]


class Http1Transport(httpx.AsyncBaseTransport):
    """An httpx transport speaking HTTP/1.1 over a keep-alive pool of connections; origins
    behind a proxy (HTTP(S)_PROXY, NO_PROXY) go through httpx's own transport."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        # The pool's clock only ages idle connections: the plain monotonic clock does, without
        # anyio's look-up of the running event loop on every request.
        self._pool = ConnectionPool(limits, self._connect, time.monotonic)
        self._ssl: ssl.SSLContext | None = None
        self._routes: dict[tuple[str, str, int | None], _Route] = {}
        self._proxies: dict[str, httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        origin, proxy = self._origin(url)
        if proxy is not None:
            return await proxy.handle_async_request(request)
        timeout = request.extensions.get("timeout", {})
        head = request_head(request.method, url.raw_path, request.headers.raw)
        streamed = not isinstance(request.stream, httpx.ByteStream)  # httpx said: chunked
        body = await request.aread()
        if streamed:
            body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
        connection, answer, content = await self._round_trip(
            origin, request.method, head, body, timeout
        )
        if content is not None:
            # Nearly every answer: a few hundred bytes, plain, its length said up front. Read
            # at once, it spares the caller a streamed read (daemon/protocol/answers.py).
            return httpx.Response(
                answer.status,
                headers=answer.headers,
                content=content,
                request=request,
                extensions={"http_version": answer.version, "reason_phrase": answer.reason},
            )
        return self._streamed(origin, connection, answer, request, timeout)

    async def exchange(
        self,
        method: str,
        url: httpx.URL,
        headers: list[tuple[bytes, bytes]],
        body: bytes | None,
        limits: dict[str, float | None],
    ) -> Answer | httpx.Response | None:
        """One request without an `httpx.Request`: the daemon's caller sends through here.

        A small, plain answer comes back as an `Answer`, any other as a streamed
        `httpx.Response`; None (nothing sent) for an origin behind a proxy, which only
        `handle_async_request` serves. `headers` are the client's and the call's; the Host
        and the Content-Length are added here, as httpx adds them to a request. `limits`:
        httpx's timeout extension (`httpx.Timeout.as_dict()`)."""
        origin, proxy = self._origin(url)
        if proxy is not None:
            return None
        sent = [(b"Host", url.netloc), *headers]
        if body:
            sent.append((b"Content-Length", b"%d" % len(body)))
        head = request_head(method, url.raw_path, sent)
        connection, answer, content = await self._round_trip(
            origin, method, head, body or b"", limits
        )
        if content is not None:
            reason = answer.reason.decode("ascii", "replace")
            return Answer(answer.status, reason, httpx.Headers(answer.headers), content)
        request = httpx.Request(method, url, headers=sent)  # only for httpx's errors' sake
        return self._streamed(origin, connection, answer, request, limits)

    def _origin(self, url: httpx.URL) -> _Route:
        key = (url.scheme, url.host, url.port)
        return self._routes[key] if key in self._routes else self._route(key)

    async def _round_trip(
        self,
        origin: Origin,
        method: str,
        head: bytes,
        body: bytes,
        limits: dict[str, float | None],
    ) -> tuple[Connection, AnswerHead, bytes | None]:
        """Write one request on a pooled connection and read its answer's head (and its body
        when small and plain: the connection is back in the pool then)."""
        connection = await self._pool.acquire(
            origin, wait=limits.get("pool"), connect_within=limits.get("connect")
        )
        try:
            answer, content = await exchange(
                connection, head, body, limits, head_request=method == "HEAD"
            )
        except BaseException:
            await self._pool.discard(connection)
            raise
        if content is not None:
            await self._pool.release(connection, origin, reusable=answer.keep_alive)
        return connection, answer, content

    def _streamed(
        self,
        origin: Origin,
        connection: Connection,
        answer: AnswerHead,
        request: httpx.Request,
        limits: dict[str, float | None],
    ) -> httpx.Response:
        """An answer streamed as it arrives, never read whole here: the caller counts it
        against its cap and inflates it itself."""
        body_stream = AnswerBody(self._pool, connection, origin, answer, limits.get("read"))
        return httpx.Response(
            answer.status,
            headers=answer.headers,
            stream=body_stream,
            request=request,
            extensions={"http_version": answer.version, "reason_phrase": answer.reason},
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
        proxies, self._proxies = self._proxies, {}
        for transport in proxies.values():
            await transport.aclose()

    async def _connect(self, origin: Origin, within: float | None) -> Connection:
        scheme, host, port = origin
        try:
            with anyio.fail_after(within):
                return await connect(host, port, self._tls() if scheme == "https" else None)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {host}:{port} in time") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{host}:{port}: {exc or type(exc).__name__}") from exc

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            # httpx's own verification: certifi's bundle, SSL_CERT_FILE / SSL_CERT_DIR.
            self._ssl = httpx.create_ssl_context()
        return self._ssl

    def _route(self, key: tuple[str, str, int | None]) -> _Route:
        """An origin's (scheme, host, port), and the proxy transport it goes through (None:
        direct); looked up once per origin.

        The proxy settings are read from the process environment here, the one place outside
        daemon/config.py that does: they are the standard variables every HTTP client honours
        (httpx reads them the same way, through urllib), not settings of the daemon."""
        scheme, host, port = key
        if scheme not in _PORTS or not host:
            raise httpx.UnsupportedProtocol(f"not an http(s) URL: {scheme}://{host}")
        proxies = urllib.request.getproxies_environment()
        proxy = proxies.get(scheme) or proxies.get("all")
        netloc = f"{host}:{port}" if port else host
        transport = None
        # Public in urllib, missing from its type stubs.
        bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
        if proxy and not bypass(netloc, proxies):
            if proxy not in self._proxies:
                self._proxies[proxy] = httpx.AsyncHTTPTransport(
                    proxy=proxy, limits=self._limits, verify=self._tls()
                )
            transport = self._proxies[proxy]
        route = self._routes[key] = ((scheme, host, port or _PORTS[scheme]), transport)
        return route
