"""A scriptable fake of the Anthropic Messages API for running the real Claude Code CLI offline.

Each "main" request (a streamed `POST /v1/messages` that offers tools — the agent's own turns)
takes the next step of the script: a text answer, a tool call, a stall or an API error. Anything
else the CLI calls (title/summary side requests, token counting, odd GETs) gets a harmless
answer and is logged, so a test can show exactly what the CLI asked for.

    async with fake_anthropic([ToolUse("sleep 3"), Text("done")]) as api:
        env = claude_env(api.url, home)
        ...
        assert api.main_requests()[1].n_tool_results == 1
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.cli_env import cli_env
from tests.fakes.loopback import serve_app

# Every answer reports the same token counts, so a test can predict a run's usage exactly.
USAGE = {
    "input_tokens": 100,
    "output_tokens": 20,
    "cache_read_input_tokens": 7,
    "cache_creation_input_tokens": 3,
}


@dataclass(frozen=True)
class Text:
    """Answer with text (optionally preceded by a thinking block) and end the turn."""

    text: str = "Hello from the fake Anthropic server. The task is done."
    thinking: str = ""


@dataclass(frozen=True)
class ToolUse:
    """Answer with a short text and one tool call (Bash with `command` unless told otherwise)."""

    command: str
    text: str = "I'll run a command."
    tool: str = "Bash"
    input: Mapping[str, Any] | None = None

    def tool_input(self) -> dict[str, Any]:
        if self.input is not None:
            return dict(self.input)
        return {"command": self.command, "description": "Run the scripted command"}


@dataclass(frozen=True)
class Stall:
    """Accept the request and then send nothing more (`no-bytes`, `after-headers`, `mid-stream`)."""

    when: str = "no-bytes"


@dataclass(frozen=True)
class ApiError:
    """Answer with an HTTP error in the API's error shape (529 overloaded by default)."""

    status: int = 529
    type: str = "overloaded_error"
    message: str = "fake server scripted error 529"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Cut:
    """Start streaming an answer, then drop the connection mid-response; `until_resumed`: do
    so on every request of a fresh session, and answer `Text()` to one that carries history."""

    until_resumed: bool = False


Step = Text | ToolUse | Stall | ApiError | Cut

# The API's own answers to the failures a run meets, as the real API words and heads them.
RATE_LIMIT_MESSAGE = (
    "This request would exceed the rate limit for your organization "
    "(4a1c2f9e-8b7d-4e3f-9a21-5c6d7e8f9a0b) of 30,000 input tokens per minute. For details, "
    "refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers "
    "for current usage. Please reduce the prompt length or the maximum tokens requested, or "
    "try again later. You may also contact sales at https://www.anthropic.com/contact-sales to "
    "discuss your options for a rate limit increase."
)


def rate_limited(retry_after: int = 1) -> ApiError:
    """429 `rate_limit_error` for input tokens per minute, with `retry-after` and the
    `anthropic-ratelimit-*` headers."""
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + retry_after))
    headers = {"retry-after": str(retry_after), "x-should-retry": "true"}
    for kind, limit, remaining in (
        ("requests", "50", "49"),
        ("input-tokens", "30000", "0"),
        ("output-tokens", "8000", "8000"),
        ("tokens", "38000", "8000"),
    ):
        headers[f"anthropic-ratelimit-{kind}-limit"] = limit
        headers[f"anthropic-ratelimit-{kind}-remaining"] = remaining
        headers[f"anthropic-ratelimit-{kind}-reset"] = reset
    return ApiError(429, "rate_limit_error", RATE_LIMIT_MESSAGE, headers)


PROMPT_TOO_LONG = ApiError(
    400, "invalid_request_error", "prompt is too long: 215439 tokens > 200000 maximum"
)
CREDIT_BALANCE = ApiError(
    400,
    "invalid_request_error",
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
    "to upgrade or purchase credits.",
)
BAD_KEY = ApiError(401, "authentication_error", "invalid x-api-key")
NO_MODEL = ApiError(404, "not_found_error", "model: claude-nonexistent-9")
OVERLOADED = ApiError(529, "overloaded_error", "Overloaded")


@dataclass
class ApiCall:
    """One request the fake received, as the tests inspect it."""

    seq: int
    t: float
    method: str
    path: str
    kind: str
    action: str = ""
    stream: bool = False
    model: str = ""
    n_messages: int = 0
    n_tool_results: int = 0
    retry_count: str = ""
    system: str = ""
    body: dict[str, Any] = field(default_factory=dict)


class FakeAnthropic:
    """The fake's state: the remaining script, the request log and the base URL once serving."""

    def __init__(
        self,
        script: Iterable[Step],
        default: Step,
        by_marker: Mapping[str, Iterable[Step]] | None = None,
    ) -> None:
        self.url = ""
        self.requests: list[ApiCall] = []
        self._script: deque[Step] = deque(script)
        self._default = default
        self._by_marker = {k: deque(v) for k, v in (by_marker or {}).items()}
        self._first_size: dict[str, int] = {}
        self._started = time.monotonic()
        self._changed = anyio.Event()
        self.closing = anyio.Event()

    def main_requests(self) -> list[ApiCall]:
        """The agent's own turns (each consumed one script step)."""
        return [r for r in self.requests if r.kind == "main"]

    def log(self) -> list[dict[str, Any]]:
        """The request log without bodies, for printing."""
        return [
            {k: v for k, v in vars(r).items() if k not in ("body", "system")} for r in self.requests
        ]

    async def wait_main_requests(self, count: int) -> None:
        """Wait until `count` main requests arrived (bound it with a cancel scope)."""
        while len(self.main_requests()) < count:
            await self._changed.wait()

    def _record(self, request: ApiCall) -> None:
        self.requests.append(request)
        self._changed.set()
        self._changed = anyio.Event()

    def _grown(self, body: dict[str, Any]) -> bool:
        """Whether this request carries more than its session's first one did: a resumed run
        sends the earlier prompt too (the CLI merges it into the same user message, so the
        blocks grow, not the messages). The session is the one `metadata.user_id` names."""
        try:
            session = json.loads(body["metadata"]["user_id"]).get("session_id", "")
        except (KeyError, TypeError, ValueError):
            session = ""
        size = sum(
            len(m["content"]) if isinstance(m.get("content"), list) else 1
            for m in body.get("messages") or []
            if isinstance(m, dict)
        )
        first = self._first_size.setdefault(session, size)
        return size > first

    def _next_step(self, body: dict[str, Any]) -> Step:
        history = json.dumps(body.get("messages") or [])
        for marker, steps in self._by_marker.items():
            if marker in history:
                # A run's own steps, in order; the last one answers every request after it.
                step = steps[0]
                if isinstance(step, Cut) and step.until_resumed:
                    return Text() if self._grown(body) else step
                return steps.popleft() if len(steps) > 1 else step
        return self._script.popleft() if self._script else self._default

    async def messages(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        stream = bool(body.get("stream"))
        # The agent's turns offer tools; after a failed stream the CLI asks once more without
        # streaming, and that request is a turn too.
        main = bool(body.get("tools"))
        step = self._next_step(body) if main else Text("Fake side answer.")
        record = ApiCall(
            seq=len(self.requests) + 1,
            t=round(time.monotonic() - self._started, 3),
            method=request.method,
            path=request.url.path + (f"?{request.url.query}" if request.url.query else ""),
            kind="main" if main else "side",
            action=type(step).__name__,
            stream=stream,
            model=str(body.get("model", "")),
            n_messages=len(body.get("messages") or []),
            n_tool_results=_count_tool_results(body.get("messages") or []),
            retry_count=request.headers.get("x-stainless-retry-count", ""),
            system=json.dumps(body.get("system", "")),
            body=body,
        )
        self._record(record)
        model = record.model or "claude-fake"
        if isinstance(step, ApiError):
            return JSONResponse(
                {"type": "error", "error": {"type": step.type, "message": step.message}},
                status_code=step.status,
                headers={"request-id": _id("req_"), **step.headers},
            )
        if isinstance(step, Stall) and step.when == "no-bytes":
            await self.closing.wait()
            return Response(status_code=503)
        if isinstance(step, Cut) and not stream:
            return StreamingResponse(_cut_body(), media_type="application/json")
        if not stream:
            text = step.text if isinstance(step, Text | ToolUse) else ""
            return JSONResponse(_message(model, [{"type": "text", "text": text}], "end_turn"))
        return StreamingResponse(
            self._sse(step, model),
            media_type="text/event-stream",
            headers={"request-id": _id("req_"), "cache-control": "no-cache"},
        )

    async def _sse(self, step: Step, model: str) -> AsyncIterator[bytes]:
        if isinstance(step, Cut):
            start = _message(model, [], None)
            yield _event("message_start", {"type": "message_start", "message": start})
            # Raising mid-body makes the server drop the connection, as a proxy reset would.
            raise ConnectionResetError("fake API cut the stream")
        if isinstance(step, Stall):
            if step.when == "mid-stream":
                start = _message(model, [], None)
                yield _event("message_start", {"type": "message_start", "message": start})
                yield _event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
                yield _event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "Let me think about"},
                    },
                )
            await self.closing.wait()
            return
        for name, data in _answer_events(step, model):
            yield _event(name, data)


async def _other(request: Request) -> Response:
    """Anything but `POST /v1/messages`: log it via the app state and answer harmlessly."""
    fake: FakeAnthropic = request.app.state.fake
    fake._record(
        ApiCall(
            seq=len(fake.requests) + 1,
            t=round(time.monotonic() - fake._started, 3),
            method=request.method,
            path=request.url.path,
            kind="other",
        )
    )
    if request.url.path.endswith("/count_tokens"):
        return JSONResponse({"input_tokens": USAGE["input_tokens"]})
    return JSONResponse({})


async def _cut_body() -> AsyncIterator[bytes]:
    yield b'{"id": "msg_'
    raise ConnectionResetError("fake API cut the answer")


def _count_tool_results(messages: list[Any]) -> int:
    count = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    return count


def _id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def _message(model: str, content: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
    return {
        "id": _id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": dict(USAGE, output_tokens=1 if stop is None else USAGE["output_tokens"]),
    }


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _answer_events(step: Text | ToolUse, model: str) -> list[tuple[str, dict[str, Any]]]:
    blocks: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    if isinstance(step, Text) and step.thinking:
        blocks.append(
            (
                {"type": "thinking", "thinking": "", "signature": ""},
                {"type": "thinking_delta", "thinking": step.thinking},
            )
        )
    if step.text:
        blocks.append(({"type": "text", "text": ""}, {"type": "text_delta", "text": step.text}))
    stop = "end_turn"
    if isinstance(step, ToolUse):
        stop = "tool_use"
        blocks.append(
            (
                {"type": "tool_use", "id": _id("toolu_"), "name": step.tool, "input": {}},
                {"type": "input_json_delta", "partial_json": json.dumps(step.tool_input())},
            )
        )
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": _message(model, [], None)})
    ]
    for index, (start, delta) in enumerate(blocks):
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        if delta is not None:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        if start["type"] == "thinking":
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": "fake-signature"},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": USAGE["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


@contextlib.asynccontextmanager
async def fake_anthropic(
    script: Iterable[Step] = (),
    default: Step | None = None,
    by_marker: Mapping[str, Iterable[Step]] | None = None,
) -> AsyncIterator[FakeAnthropic]:
    """Serve the fake on a loopback port; main requests past the script get `default`.

    `by_marker` gives the turns whose messages hold a marker (say, an issue id) their own
    steps, so runs that make more or fewer requests than expected cannot shift each other's.
    """
    fake = FakeAnthropic(script, default or Text(), by_marker)
    routes = [
        Route("/v1/messages", fake.messages, methods=["POST"]),
        Route("/{path:path}", _other, methods=["GET", "POST", "PUT", "DELETE", "HEAD"]),
    ]
    app = Starlette(routes=routes)
    app.state.fake = fake
    async with serve_app(app) as url:
        fake.url = url
        try:
            yield fake
        finally:
            # Stalled answers wait for this, so the server can shut down.
            fake.closing.set()


def claude_env(base_url: str, home: Path, **extra: str) -> dict[str, str]:
    """An environment that points the Claude Code CLI at the fake with a fresh HOME."""
    home.mkdir(parents=True, exist_ok=True)
    return cli_env(
        home,
        extra,
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="sk-ant-fake-key-for-tests",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
        DISABLE_AUTOUPDATER="1",
    )
