"""The HTTP transport under the daemon's httpx client: aiohttp's connection pool and parser.

httpx's own transport (httpcore) cost the daemon about 1 ms of CPU per transcript batch on
this project's 2-core test machine, most of the daemon's work at Multica's pace (every running
task's transcript each 500 ms, its status each 5 s). Through aiohttp's C parser and pool the
same batch costs about 0.45 ms. The daemon keeps httpx's API — its client, errors, timeouts and test
transports (`httpx.MockTransport`, respx) — and only the bytes go through aiohttp.

aiohttp's errors are mapped onto httpx's so that the caller (caller.py) can still tell a
request that surely never reached the server (`ConnectError`, `ConnectTimeout`) from one that
may have (`ReadError`, `ReadTimeout`, `RemoteProtocolError`): a transcript batch in doubt is
never sent again to a server that does not deduplicate.
"""

from __future__ import annotations

import io
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import aiohttp
import httpx
import yarl
from aiohttp.helpers import get_env_proxy_for_url

_LARGE_BODY = 1024 * 1024
_SMALL_ANSWER = 64 * 1024
_ENCODING = "Content-Encoding"
_Proxy = tuple[yarl.URL | None, aiohttp.BasicAuth | None]
_SKIPPED = frozenset({"connection", "content-length", "transfer-encoding"})
"""Request headers aiohttp sets itself."""


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport sending each request through one aiohttp session."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | None = None
        self._proxies: dict[tuple[str, str, int | None], _Proxy] = {}

    def _open(self) -> aiohttp.ClientSession:
        # Made on the first request: aiohttp binds its session to the running event loop.
        if self._ssl is None:
            # httpx's own verification: certifi's bundle, SSL_CERT_FILE / SSL_CERT_DIR.
            self._ssl = httpx.create_ssl_context()
        connector = aiohttp.TCPConnector(
            limit=self._limits.max_connections or 0,
            keepalive_timeout=self._limits.keepalive_expiry or 5.0,
            ssl=self._ssl,
        )
        # No `trust_env`: with it aiohttp looks up the proxy and reads ~/.netrc in a worker
        # thread on every request, a third of the transport's cost; `_proxy` looks once.
        # No cookies: the protocol has none.
        self._session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False
        )
        return self._session

    def _proxy(self, url: httpx.URL) -> _Proxy:
        """The proxy (and its credentials) HTTP(S)_PROXY and NO_PROXY name for `url`'s origin,
        looked up once (httpx honours them too)."""
        origin = (url.scheme, url.host, url.port)
        if origin not in self._proxies:
            try:
                self._proxies[origin] = get_env_proxy_for_url(yarl.URL(str(url)))
            except LookupError:
                self._proxies[origin] = (None, None)
        return self._proxies[origin]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session or self._open()
        proxy, proxy_auth = self._proxy(request.url)
        timeout = request.extensions.get("timeout", {})
        headers = [(k, v) for k, v in request.headers.multi_items() if k not in _SKIPPED]
        body = request.content
        # Past 1 MiB aiohttp wants a file-like body, written in chunks between other work.
        data = io.BytesIO(body) if len(body) > _LARGE_BODY else body or None
        with _mapped_errors():
            answer = await session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=data,
                allow_redirects=False,
                compress=None,
                proxy=proxy,
                proxy_auth=proxy_auth,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=timeout.get("pool"),
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                ),
            )
        heard = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in answer.raw_headers]
        extensions = {
            "http_version": b"HTTP/1.1",
            "reason_phrase": (answer.reason or "").encode("latin-1"),
        }
        length = answer.content_length
        if length is not None and length <= _SMALL_ANSWER and not answer.headers.get(_ENCODING):
            # Nearly every answer: a few hundred bytes, plain, its length said up front. Read
            # at once (aiohttp reads no more than the length), it spares the caller a streamed
            # read (daemon/protocol/answers.py), a fifth of a request's cost.
            with _mapped_errors():
                payload = await answer.read()
            return httpx.Response(
                answer.status,
                headers=heard,
                content=payload,
                request=request,
                extensions=extensions,
            )
        # Anything else is streamed as it arrives, never read whole here: the caller counts it
        # against its cap and inflates it itself.
        return httpx.Response(
            answer.status,
            headers=heard,
            stream=_Body(answer),
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _Body(httpx.AsyncByteStream):
    """An answer's body as aiohttp reads it, raw (compressed bodies stay compressed)."""

    def __init__(self, answer: aiohttp.ClientResponse) -> None:
        self._answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _mapped_errors():
            async for chunk in self._answer.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        # A body read to its end gives the connection back to the pool; one cut short (past
        # its cap, a cancelled call) closes it, so no half-read answer is reused.
        if self._answer.content.at_eof():
            self._answer.release()
        else:
            self._answer.close()


@contextmanager
def _mapped_errors() -> Iterator[None]:
    """aiohttp's errors as httpx's, keeping whether the request may have reached the server."""
    try:
        yield
    except aiohttp.ClientConnectorError as exc:  # no connection was made: nothing was sent
        raise httpx.ConnectError(str(exc)) from exc
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(str(exc)) from exc
    except aiohttp.SocketTimeoutError as exc:
        raise httpx.ReadTimeout(str(exc)) from exc
    except aiohttp.ServerDisconnectedError as exc:  # the request may have been read
        raise httpx.RemoteProtocolError(str(exc) or "server disconnected") from exc
    except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
        raise httpx.UnsupportedProtocol(str(exc)) from exc
    except aiohttp.ClientResponseError as exc:  # an answer that is not HTTP
        raise httpx.RemoteProtocolError(str(exc)) from exc
    except (aiohttp.ClientError, TimeoutError) as exc:  # reset or cut while under way
        raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
