"""A scriptable fake of the OpenAI Responses API for running the real Codex CLI offline.

Each streamed `POST /v1/responses` takes the next step of the script: a text answer, a shell
command (as a call of whichever shell tool the CLI offers), a stall or an API error. Anything
else the CLI calls is logged and answered harmlessly.

    async with fake_openai([Shell("sleep 3"), Answer("done")]) as api:
        home = codex_home(tmp_path / "codex", api.url)
        ...
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
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.cli_env import cli_env
from tests.fakes.loopback import serve_app

# Every answer reports the same token counts, so a test can predict a run's usage exactly.
USAGE = {"input_tokens": 200, "cached_tokens": 50, "output_tokens": 30, "reasoning_tokens": 5}
MODEL = "gpt-fake"
API_KEY_ENV = "FAKE_OPENAI_API_KEY"


@dataclass(frozen=True)
class Answer:
    """Answer with an assistant message (after a reasoning summary, if given); end the turn."""

    text: str = "Hello from the fake OpenAI server. The task is done."
    reasoning: str = ""


@dataclass(frozen=True)
class Shell:
    """Answer with one shell command, called through the shell tool the request offers."""

    command: str


@dataclass(frozen=True)
class Stall:
    """Accept the request and then send nothing (`no-bytes`) or only the first event."""

    when: str = "no-bytes"


@dataclass(frozen=True)
class ApiError:
    """Answer with an HTTP error in the API's error shape."""

    status: int = 500
    message: str = "fake server scripted error"
    type: str = "server_error"
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    """More fields of the error object (ChatGPT's `resets_at`, `plan_type`)."""


Step = Answer | Shell | Stall | ApiError

# The API's own answers to the limits a run meets, as the real APIs word them.
RATE_LIMITED = ApiError(
    429,
    "Rate limit reached for gpt-fake in organization org-fake on tokens per min (TPM): "
    "Limit 30000, Used 29500, Requested 2000. Please try again in 3.0s. Visit "
    "https://platform.openai.com/account/rate-limits to learn more.",
    "tokens",
    "rate_limit_exceeded",
    {"retry-after": "1", "x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "0"},
)
NO_QUOTA = ApiError(
    429,
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors.",
    "insufficient_quota",
    "insufficient_quota",
)


def usage_limit(resets_at: int) -> ApiError:
    """ChatGPT's 429 `usage_limit_reached` for a plan's usage window, reset at `resets_at`."""
    return ApiError(
        429,
        "The usage limit has been reached",
        "usage_limit_reached",
        None,
        extra={"plan_type": "plus", "resets_at": resets_at, "resets_in_seconds": 3600},
    )


@dataclass
class ApiCall:
    """One request the fake received."""

    seq: int
    t: float
    method: str
    path: str
    kind: str
    action: str = ""
    model: str = ""
    tools: list[str] = field(default_factory=list)
    n_inputs: int = 0
    n_tool_outputs: int = 0
    body: dict[str, Any] = field(default_factory=dict)


class FakeOpenAI:
    """The fake's state: the remaining script, the request log and the base URL once serving."""

    def __init__(self, script: Iterable[Step], default: Step) -> None:
        self.url = ""
        self.requests: list[ApiCall] = []
        self._script: deque[Step] = deque(script)
        self._default = default
        self._started = time.monotonic()
        self._changed = anyio.Event()
        self.closing = anyio.Event()

    @property
    def started(self) -> float:
        """When the fake started (monotonic): each request's `t` counts from here."""
        return self._started

    def main_requests(self) -> list[ApiCall]:
        """The agent's own turns (each consumed one script step)."""
        return [r for r in self.requests if r.kind == "main"]

    def log(self) -> list[dict[str, Any]]:
        """The request log without bodies, for printing."""
        return [{k: v for k, v in vars(r).items() if k != "body"} for r in self.requests]

    async def wait_main_requests(self, count: int) -> None:
        """Wait until `count` main requests arrived (bound it with a cancel scope)."""
        while len(self.main_requests()) < count:
            await self._changed.wait()

    def call(self, request: Request, kind: str, **fields: Any) -> ApiCall:
        """A log entry for `request`, numbered and timed."""
        return ApiCall(
            seq=len(self.requests) + 1,
            t=round(time.monotonic() - self._started, 3),
            method=request.method,
            path=request.url.path,
            kind=kind,
            **fields,
        )

    def next_step(self) -> Step:
        """The script's next step, or the default once it is used up."""
        return self._script.popleft() if self._script else self._default

    def record(self, call: ApiCall) -> None:
        self.requests.append(call)
        self._changed.set()
        self._changed = anyio.Event()

    async def responses(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = {}
        inputs = body.get("input") or []
        step = self.next_step()
        call = self.call(
            request,
            "main",
            action=type(step).__name__,
            model=str(body.get("model", "")),
            tools=[_tool_name(t) for t in body.get("tools") or []],
            n_inputs=len(inputs),
            n_tool_outputs=sum(
                isinstance(i, dict) and str(i.get("type", "")).endswith("_output") for i in inputs
            ),
            body=body,
        )
        self.record(call)
        if isinstance(step, ApiError):
            error = {"message": step.message, "type": step.type, "code": step.code, **step.extra}
            return JSONResponse({"error": error}, status_code=step.status, headers=step.headers)
        if isinstance(step, Stall) and step.when == "no-bytes":
            await self.closing.wait()
            return Response(status_code=503)
        return StreamingResponse(self._sse(step, call), media_type="text/event-stream")

    async def _sse(self, step: Step, call: ApiCall) -> AsyncIterator[bytes]:
        response_id = "resp_" + uuid.uuid4().hex[:20]
        created = {"id": response_id, "object": "response", "status": "in_progress"}
        yield _event({"type": "response.created", "response": created})
        if isinstance(step, Stall):
            await self.closing.wait()
            return
        items = [_item(step, call)]
        if isinstance(step, Answer) and step.reasoning:
            items.insert(0, _reasoning(step.reasoning))
        for index, item in enumerate(items):
            added = {"type": "response.output_item.added", "output_index": index, "item": item}
            yield _event(added)
            yield _event({"type": "response.output_item.done", "output_index": index, "item": item})
        usage = {
            "input_tokens": USAGE["input_tokens"],
            "input_tokens_details": {"cached_tokens": USAGE["cached_tokens"]},
            "output_tokens": USAGE["output_tokens"],
            "output_tokens_details": {"reasoning_tokens": USAGE["reasoning_tokens"]},
            "total_tokens": USAGE["input_tokens"] + USAGE["output_tokens"],
        }
        done = {"id": response_id, "object": "response", "status": "completed", "usage": usage}
        yield _event({"type": "response.completed", "response": done})


def _tool_name(tool: Any) -> str:
    if not isinstance(tool, dict):
        return "?"
    return str(tool.get("name") or tool.get("type") or "?")


def _item(step: Answer | Shell, call: ApiCall) -> dict[str, Any]:
    if isinstance(step, Answer):
        return {
            "type": "message",
            "role": "assistant",
            "id": "msg_" + uuid.uuid4().hex[:20],
            "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
    call_id = "call_" + uuid.uuid4().hex[:20]
    if "exec_command" in call.tools:
        name, arguments = "exec_command", {"cmd": step.command}
    elif "shell_command" in call.tools:
        name, arguments = "shell_command", {"command": step.command}
    else:
        name, arguments = "shell", {"command": ["bash", "-lc", step.command]}
    return {
        "type": "function_call",
        "id": "fc_" + uuid.uuid4().hex[:20],
        "status": "completed",
        "name": name,
        "arguments": json.dumps(arguments),
        "call_id": call_id,
    }


def _reasoning(text: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": "rs_" + uuid.uuid4().hex[:20],
        "summary": [{"type": "summary_text", "text": text}],
    }


def sse_data(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying `payload`, without an event name."""
    return f"data: {json.dumps(payload)}\n\n".encode()


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


async def _other(request: Request) -> Response:
    fake: FakeOpenAI = request.app.state.fake
    fake.record(fake.call(request, "other"))
    if request.url.path.endswith("/models"):
        return JSONResponse({"object": "list", "data": [], "models": []})
    return JSONResponse({})


FakeT = TypeVar("FakeT", bound=FakeOpenAI)


@contextlib.asynccontextmanager
async def serve_fake(fake: FakeT, *routes: Route) -> AsyncIterator[FakeT]:
    """Serve a scripted fake on a loopback port: its `routes`, and anything else logged and
    answered harmlessly."""
    catch_all = Route("/{path:path}", _other, methods=["GET", "POST", "PUT", "DELETE", "HEAD"])
    app = Starlette(routes=[*routes, catch_all])
    app.state.fake = fake
    async with serve_app(app) as url:
        fake.url = url
        try:
            yield fake
        finally:
            fake.closing.set()


def fake_openai(
    script: Iterable[Step] = (), default: Step | None = None
) -> contextlib.AbstractAsyncContextManager[FakeOpenAI]:
    """Serve the fake on a loopback port; requests past the script get `default`."""
    fake = FakeOpenAI(script, default or Answer())
    return serve_fake(fake, Route("/v1/responses", fake.responses, methods=["POST"]))


def codex_home(path: Path, base_url: str) -> Path:
    """A fresh CODEX_HOME whose config sends every model call to the fake."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.toml").write_text(
        f'model = "{MODEL}"\n'
        'model_provider = "fake"\n'
        "[model_providers.fake]\n"
        'name = "fake"\n'
        f'base_url = "{base_url}/v1"\n'
        f'env_key = "{API_KEY_ENV}"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
    )
    return path


def codex_env(home: Path, codex_dir: Path, **extra: str) -> dict[str, str]:
    """An environment for the Codex CLI with a fresh HOME and CODEX_HOME."""
    home.mkdir(parents=True, exist_ok=True)
    return cli_env(
        home,
        extra,
        CODEX_HOME=str(codex_dir),
        **{API_KEY_ENV: "sk-fake-key-for-tests"},
    )
