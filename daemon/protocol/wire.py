"""HTTP plumbing shared by the server clients: the protocol's headers, paths, how an answer is
read, and what a failure means.

`error_for_response` is the one place that maps a non-2xx answer onto daemon/errors.py
(5xx, 408 and 429 are transient; 404 "task not found" / "runtime not found" are the
task or runtime gone; every other status is permanent).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from daemon.errors import (
    MalformedInputError,
    PermanentServerError,
    RuntimeGoneError,
    ServerError,
    TaskGoneError,
    TransientServerError,
)
from daemon.protocol import jsonin
from daemon.protocol.answers import ACCEPT_ENCODING
from daemon.protocol.models import Task, WireModel, Workspace
from daemon.protocol.release import cli_version
from daemon.protocol.transport import Http1Transport

M = TypeVar("M", bound=WireModel)
_WORKSPACES = TypeAdapter(list[Workspace])

CONNECT_TIMEOUT = 10.0
DAEMON_ID_HEADER = "X-Daemon-ID"
"""Names the daemon behind a request; the embedded server lets only a task's claimant report it."""
DEDUPE_HEADER = "X-Message-Dedupe"
"""On a messages answer, `seq`: the server stores each (task, seq) once, so a re-send is safe."""
TASK_STATUS_HEADER = "X-Task-Status"
"""On a messages answer, the task's status then (this project's server; Multica sends none)."""
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
_ERROR_TEXT_LIMIT = 300


def client_os() -> str:
    """This machine's OS as the protocol names it: `linux`, `macos` or `windows`."""
    if sys.platform == "darwin":
        return "macos"
    if sys.platform.startswith("win"):
        return "windows"
    return "linux" if sys.platform.startswith("linux") else sys.platform


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


CAPABILITIES = ("skill-bundles-v1",)
"""What this daemon tells the server it handles (`X-Client-Capabilities`, as Multica's daemon
sends it on every request and the control WebSocket). Each name changes what a claim carries,
so only what is implemented is named: `skill-bundles-v1` — skills by reference, resolved
through `skill-bundles/resolve` (daemon/task/setup/skill_bundles.py). Not named:
`coalesced-comments-v1` (without it the server folds queued comments into the one trigger
comment this daemon reads), `local-worktree-v1` (a user's local directory in worktree mode),
`rpc-v1` (claims over the WebSocket), and Multica's ungated `execution-manifest-v1`,
`agent-skill-v1`, `remote-mcp-v1`. No capability names the repository checkout route."""


def protocol_headers(token: str, version: str) -> dict[str, str]:
    """The headers every request carries, HTTP and the control WebSocket alike."""
    headers = {
        "X-Client-Platform": "daemon",
        # What Multica logs as the client's version: the same string as `cli_version`.
        "X-Client-Version": cli_version(version),
        "X-Client-OS": client_os(),
        "X-Client-Capabilities": ",".join(CAPABILITIES),
        "User-Agent": f"agent-daemon/{version}",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def error_for_response(endpoint: str, response: httpx.Response) -> ServerError:
    """The `ServerError` a non-2xx response stands for (daemon/errors.py)."""
    status = response.status_code
    text = error_text(response)
    if status >= 500 or status in (408, 429):
        return TransientServerError(endpoint, text, status)
    if status == 404:
        lowered = text.lower()
        if "task not found" in lowered:
            return TaskGoneError(endpoint, text, status)
        if "runtime not found" in lowered:
            return RuntimeGoneError(endpoint, text, status)
    return PermanentServerError(endpoint, text, status)


def refuses_task(exc: ServerError) -> bool:
    """Whether the server refuses anything about this task: it is gone (404, 410), or the
    daemon's token is refused (401) or not the task's holder (403). Any other 4xx (400, 413,
    422, ...) is about what the request held."""
    return isinstance(exc, TaskGoneError) or exc.status in (401, 403, 404, 410)


def error_text(response: httpx.Response) -> str:
    """The server's `{"error": ...}` text, else the start of the body, else the reason."""
    text = ""
    try:
        body = answer_json(response)
    except ValueError:
        text = response.text
    else:
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            text = body["error"]
        else:
            text = response.text
    text = " ".join(text.split())[:_ERROR_TEXT_LIMIT]
    return text or response.reason_phrase or "no error text"


def describe_transport_error(exc: httpx.RequestError) -> str:
    """A short text for a transport error (its class name says most: ConnectError, ...)."""
    detail = " ".join(str(exc).split())[:_ERROR_TEXT_LIMIT]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def describe_parse_error(exc: ValueError) -> str:
    """Why a 2xx body did not parse, naming fields but never their values."""
    # Never the offending input: a malformed task may carry its auth token.
    if isinstance(exc, ValidationError):
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)[:3]
        ]
        more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        return "; ".join(problems) + more
    if isinstance(exc, MalformedInputError):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return "body is not JSON"
    if isinstance(exc, UnicodeDecodeError):
        return "body is not UTF-8"
    return " ".join(str(exc).split())[:_ERROR_TEXT_LIMIT]


def answer_json(response: httpx.Response) -> Any:
    """The JSON of an answer's body, read through the one bounded reader (jsonin)."""
    return jsonin.loads(response.content, what="the answer")


def parse_model(model: type[M]) -> Callable[[httpx.Response], M]:
    """A parser of a 2xx answer into `model`."""
    return lambda response: model.model_validate(answer_json(response))


def ignore_body(response: httpx.Response) -> None:
    """The parser of an answer whose body does not matter."""
    return None


def task_path(task_id: str, action: str) -> str:
    """The path of one task's endpoint."""
    # Quoted so a task id can never reach another path of the API.
    return f"/api/daemon/tasks/{quote(task_id, safe='')}/{action}"


def parse_workspaces(response: httpx.Response) -> list[Workspace]:
    """The workspaces in a 2xx answer."""
    return _WORKSPACES.validate_python(answer_json(response))


def request_budget(http: httpx.AsyncClient) -> float:
    """The longest one request through `http` can take: connect, write and read timeouts."""
    timeout = http.timeout
    parts = (timeout.connect, timeout.write, timeout.read)
    return sum(READ_TIMEOUT if part is None else part for part in parts)


def parse_claim(response: httpx.Response) -> tuple[list[Task], list[tuple[str, str]]]:
    """The tasks of a claim answer, and (id, reason) for each task that does not parse."""
    data = answer_json(response)
    if not isinstance(data, dict) or "tasks" not in data:
        raise ValueError("a claim answer is an object with `tasks`")
    raw = data["tasks"]
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise ValueError("`tasks` is not a list")
    tasks: list[Task] = []
    rejected: list[tuple[str, str]] = []
    for item in raw:
        try:
            tasks.append(Task.model_validate(item))
        except ValidationError as exc:
            task_id = item.get("id") if isinstance(item, dict) else None
            ident = str(task_id) if isinstance(task_id, str | int) else ""
            rejected.append((ident, describe_parse_error(exc)))
    return tasks, rejected
