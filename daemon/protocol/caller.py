"""How the daemon makes one server call: retries per policy, errors mapped onto daemon/errors.py,
the outcome recorded on the circuit breaker and in the metrics, and a 2xx body that does not
parse turned into `MalformedResponseError` for that one call (the endpoints: client.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
from prometheus_client import Counter, Histogram
from pydantic_core import to_json

from daemon.errors import (
    MalformedInputError,
    MalformedResponseError,
    PermanentServerError,
    ServerError,
    TransientServerError,
    UnconfirmedError,
)
from daemon.ops.metrics import Metrics
from daemon.protocol.answers import ANSWER_LIMIT, Answer, Answered, capped, read_answer
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.http_client import READ_TIMEOUT, ProtocolClient, request_budget
from daemon.protocol.models import WireModel
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.wire import (
    DEDUPE_HEADER,
    describe_parse_error,
    describe_transport_error,
    error_for_response,
)
from daemon.shutdown import ShutdownBudget

log = logging.getLogger(__name__)

T = TypeVar("T")

_JSON_HEADERS = [(b"Content-Type", b"application/json")]
_AUTHORIZATION = b"authorization"
_URLS_KEPT = 4096
"""Parsed URLs kept (a few per running task); past it the cache starts again."""
# Failures that leave no doubt the server never read the whole request: no connection, or the
# request not fully written. Any other transport error (a read timeout, a connection dropped
# while waiting for the answer) may come after the server acted on it.
_UNSENT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.WriteError,
    httpx.WriteTimeout,
    httpx.LocalProtocolError,
    httpx.ProxyError,
)


class Caller:
    """Makes calls to the server with retries, error mapping, circuit and metrics."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        metrics: Metrics | None = None,
        circuit: CircuitBreaker | None = None,
        policy: RetryPolicy | None = None,
        report_policy: RetryPolicy | None = None,
        budget: ShutdownBudget | None = None,
        answer_limit: int = ANSWER_LIMIT,
    ) -> None:
        self._http = http
        self._metrics = metrics
        self.circuit = circuit
        self._policy = policy or RetryPolicy()
        self._report_policy = report_policy or RetryPolicy.for_reports()
        self.budget = budget or ShutdownBudget()
        self.answer_limit = answer_limit
        """Bytes of one answer, inflated, that a call reads at most (else it is malformed)."""
        self.dedupes = False
        """Whether the server's last register or transcript answer said it stores each
        (task, seq) once (`X-Message-Dedupe: seq`)."""
        self._urls: dict[str, httpx.URL] = {}
        self._series: dict[tuple[str, str], tuple[Counter, Histogram]] = {}

    def report_deadline(self, *, retry: bool = True) -> float:
        """How long one terminal report may take in all: its policy's waits plus one request."""
        waits = self._report_policy.budget() if retry else 0.0
        return waits + request_budget(self._http)

    def _url(self, path: str) -> httpx.URL:
        """The URL of `path` under the client's base URL, parsed once per path: httpx parses a
        relative one again on every request (about 0.1 ms, a fifth of a request's cost)."""
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= _URLS_KEPT:
                self._urls.clear()
            url = httpx.URL(path)
            if url.is_relative_url:  # joined as httpx joins it: under the base URL's path
                base = self._http.base_url
                url = base.copy_with(raw_path=base.raw_path + url.raw_path.lstrip(b"/"))
            self._urls[path] = url
        return url

    def _note_dedupe(self, response: Answered) -> None:
        # Asked on every register and transcript answer: a server swapped behind the same URL
        # may stop deduplicating.
        self.dedupes = response.headers.get(DEDUPE_HEADER, "").strip().lower() == "seq"

    async def _call(
        self,
        endpoint: str,
        method: str,
        path: str,
        parse: Callable[[Answered], T],
        body: WireModel | dict[str, Any] | None = None,
        policy: RetryPolicy | None = None,
        *,
        resend: bool = True,
        token: str | None = None,
    ) -> T:
        """One call with retries; `resend=False`: a request that may have reached the server
        is not sent again (`UnconfirmedError`), only one that surely did not. `token` sends
        this bearer token instead of the client's own (a task-scoped daemon token)."""
        policy = policy or self._policy
        payload = (
            body.model_dump(mode="json", exclude_none=True) if isinstance(body, WireModel) else body
        )
        # pydantic-core serialises a 1,000-message batch several times faster than json.
        content = None if payload is None else to_json(payload)
        headers = None if payload is None else _JSON_HEADERS
        if token is not None:
            headers = [*(headers or ()), (_AUTHORIZATION, f"Bearer {token}".encode())]
        failures = 0
        while True:
            started = time.perf_counter()
            throttled, retry_after = False, None
            try:
                response = await self._send(method, path, content, headers)
            except MalformedInputError as exc:  # an answer past its cap, a bad encoding
                self._observe(endpoint, "malformed", started, reached=True)
                raise MalformedResponseError(endpoint, str(exc)) from None
            except httpx.UnsupportedProtocol as exc:  # a bad server URL: no retry helps
                self._observe(endpoint, "permanent", started, reached=False)
                raise PermanentServerError(endpoint, describe_transport_error(exc)) from exc
            except httpx.RequestError as exc:
                self._observe(endpoint, "transient", started, reached=False)
                text = describe_transport_error(exc)
                error: ServerError = (
                    TransientServerError(endpoint, text)
                    if resend or isinstance(exc, _UNSENT)
                    else UnconfirmedError(endpoint, text)
                )
            else:
                if response.is_success:
                    try:
                        result = parse(response)
                    except ValueError as exc:
                        self._observe(endpoint, "malformed", started, reached=True)
                        # `from None`: the validation error quotes the body (maybe a token).
                        raise MalformedResponseError(
                            endpoint, describe_parse_error(exc), response.status_code
                        ) from None
                    self._observe(endpoint, "ok", started, reached=True)
                    return result
                error = error_for_response(endpoint, response)
                if not isinstance(error, TransientServerError):
                    self._observe(endpoint, "permanent", started, reached=True)
                    raise error
                self._observe(endpoint, "transient", started, reached=False)
                throttled = response.status_code == 429
                retry_after = response.headers.get("Retry-After")
                if not resend and response.status_code >= 500:
                    # A 5xx may come after the handler stored part of the batch.
                    error = UnconfirmedError(endpoint, error.message, response.status_code)
            failures += 1
            delay = policy.delay(failures, throttled=throttled, retry_after=retry_after)
            if delay is None or isinstance(error, UnconfirmedError):
                if self.circuit is not None:
                    self.circuit.record_failure()
                raise error
            log.warning(
                "server %s attempt %d failed (%s); retrying in %.1fs",
                endpoint,
                failures,
                error,
                delay,
            )
            if self._metrics is not None:
                self._metrics.server_retries.labels(endpoint).inc()
            await policy.sleep(delay)

    async def _send(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: list[tuple[bytes, bytes]] | None,
    ) -> Answered:
        """One request, its answer read whole within `answer_limit` (answers.py).

        Through the daemon's own client the request goes straight to its transport, which
        answers a small, plain answer without httpx's request and response objects
        (`Http1Transport.exchange`: 80–100 µs of CPU a request less). Through any other client
        (the embedded server in process, tests' mock transports) the request is built here
        from the client's headers and timeout, as its `build_request` would build it with no
        params and no cookies (the protocol has none), without merging every header into a
        new set twice over."""
        client = self._http
        raw = client.headers.raw
        if headers and any(name == _AUTHORIZATION for name, _ in headers):
            raw = [(k, v) for k, v in raw if k.lower() != _AUTHORIZATION]
        url, sent = self._url(path), raw + headers if headers else raw
        limits = client.timeout.as_dict()
        direct = client.direct if isinstance(client, ProtocolClient) else None
        answered = await direct.exchange(method, url, sent, content, limits) if direct else None
        if isinstance(answered, Answer):
            return capped(answered, self.answer_limit)
        if answered is None:
            request = httpx.Request(
                method, url, content=content, headers=sent, extensions={"timeout": limits}
            )
            answered = await client.send(request, stream=True)
        try:
            return await read_answer(answered, limit=self.answer_limit, within=READ_TIMEOUT)
        finally:
            await answered.aclose()

    def _observe(self, endpoint: str, outcome: str, started: float, *, reached: bool) -> None:
        if reached and self.circuit is not None:
            self.circuit.record_success()
        if self._metrics is not None:
            count, duration = self._series.get((endpoint, outcome)) or self._bind(endpoint, outcome)
            count.inc()
            duration.observe(time.perf_counter() - started)

    def _bind(self, endpoint: str, outcome: str) -> tuple[Counter, Histogram]:
        """The two series one request is counted in, looked up once per endpoint and outcome:
        `labels()` takes a lock and builds the label tuple, twice the cost of counting."""
        assert self._metrics is not None
        series = (
            self._metrics.server_requests.labels(endpoint, outcome),
            self._metrics.server_request_duration.labels(endpoint),
        )
        self._series[(endpoint, outcome)] = series
        return series
