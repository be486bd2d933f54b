"""Reading the reference server's requests: bodies, query parameters, and errors as answers."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

log = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)
_T = TypeVar("_T")

SQL_INT_MAX = 2**63 - 1
"""The largest integer SQLite stores; anything beyond is refused before it reaches a query."""


class BadRequestError(Exception):
    """The request cannot be understood; answered 400 with this message."""


class BodyTooLargeError(Exception):
    """The request body exceeds the app's limit; answered 413 without reading the rest."""


async def in_thread(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """One blocking store call, run in a worker thread so the event loop keeps serving."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def task_id(request: Request) -> str:
    """The `{task_id}` of the route."""
    return str(request.path_params["task_id"])


async def parse(request: Request, model: type[_M], limit: int) -> _M:
    """The body as `model`; an empty body counts as `{}` (several endpoints take `{}`)."""
    raw = await _read_body(request, limit)
    try:
        # Parsing and validating in one pass inside pydantic-core: a 1,000-message transcript
        # batch costs a fraction of json.loads followed by model_validate.
        return model.model_validate_json(raw if raw.strip() else b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            raise BadRequestError(f"malformed JSON body: {first['msg']}") from None
        if first["type"] == "model_type" and not first["loc"]:
            raise BadRequestError("the body must be a JSON object") from None
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise BadRequestError(f"{where}: {first['msg']}") from None


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused once it grows past `limit` bytes (whatever Content-Length claims)."""
    too_large = BodyTooLargeError(f"request body over {limit} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
    except ClientDisconnect:
        # The client went away mid-body (a daemon stopping mid-post): nothing to answer, and
        # nothing stored; it re-sends with the same seq. Not worth a traceback.
        raise BadRequestError("the client disconnected before the body was complete") from None
    return b"".join(chunks)


def int_param(
    request: Request,
    name: str,
    default: _T,
    *,
    low: int = -SQL_INT_MAX - 1,
    high: int = SQL_INT_MAX,
) -> int | _T:
    """The query parameter as an integer in [low, high]; anything else is a 400 naming it."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequestError(f"{name} must be an integer, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise BadRequestError(f"{name} must be between {low} and {high}")
    return value


def error_handler(
    status: int, message: str | None = None
) -> Callable[[Request, Exception], Awaitable[Response]]:
    """An exception handler answering `status` with the exception's text (or `message`)."""

    async def handle(request: Request, exc: Exception) -> Response:
        if status >= 500:
            log.error("%s %s failed: %r", request.method, request.url.path, exc)
        return JSONResponse({"error": message or str(exc)}, status_code=status)

    return handle


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (404 route, 405 method) in the server's `{"error": ...}` shape."""
    assert isinstance(exc, HTTPException)
    return JSONResponse(
        {"error": exc.detail.lower()}, status_code=exc.status_code, headers=exc.headers
    )
