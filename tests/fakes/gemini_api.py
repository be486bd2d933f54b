"""A scriptable fake of the Gemini API (`generativelanguage`), for Gemini CLI run offline.

The CLI reaches it through `GOOGLE_GEMINI_BASE_URL` with an API key (`gemini_env`). Each
streamed `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` that offers tools (the
agent's own turns) takes the next step of the script — the steps of the Responses fake:
`Answer`, `Shell` (a call of `run_shell_command`), `Stall` (`no-bytes`, or `first-chunk`: one
text chunk, then nothing) and `ApiError`. Side requests (token counts, the CLI's own JSON
checks) get harmless answers and are logged.

    async with fake_gemini([Shell("sleep 3"), Answer("done")]) as api:
        env = gemini_env(tmp_path, api.url)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.cli_env import cli_env
from tests.fakes.openai_api import (
    Answer,
    ApiError,
    FakeOpenAI,
    Shell,
    Stall,
    Step,
    serve_fake,
    sse_data,
)

MODEL = "gemini-2.5-flash"
USAGE = {"prompt": 150, "candidates": 15, "cached": 30, "thoughts": 0}

__all__ = ["MODEL", "USAGE", "Answer", "ApiError", "FakeGemini", "Shell", "Stall", "fake_gemini"]


class FakeGemini(FakeOpenAI):
    """The fake's state (script, request log, URL), answering the Gemini API."""

    async def models(self, request: Request) -> Response:
        model, _, method = request.path_params["rest"].partition(":")
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = {}
        contents = body.get("contents") or []
        main = method == "streamGenerateContent" and bool(body.get("tools"))
        side = Answer('{"next_speaker": "user", "reasoning": "ok"}')
        step: Step = self.next_step() if main else side
        self.record(
            self.call(
                request,
                "main" if main else "side",
                action=type(step).__name__,
                model=model,
                tools=_tool_names(body.get("tools")),
                n_inputs=len(contents),
                n_tool_outputs=sum(_has_part(c, "functionResponse") for c in contents),
                body=body,
            )
        )
        if method == "countTokens":
            return JSONResponse({"totalTokens": USAGE["prompt"]})
        if isinstance(step, ApiError):
            error = {"code": step.status, "message": step.message, "status": "INTERNAL"}
            return JSONResponse({"error": error}, status_code=step.status)
        if isinstance(step, Stall) and step.when == "no-bytes":
            await self.closing.wait()
            return Response(status_code=503)
        if method == "generateContent":
            assert isinstance(step, Answer)
            return JSONResponse(_response([{"text": step.text}], "STOP"))
        return StreamingResponse(self._chunks(step), media_type="text/event-stream")

    async def _chunks(self, step: Step) -> AsyncIterator[bytes]:
        if isinstance(step, Stall):
            yield sse_data(_response([{"text": "Working on it"}], None))
            await self.closing.wait()
            return
        if isinstance(step, Answer):
            parts: list[dict[str, Any]] = []
            if step.reasoning:
                parts.append({"text": step.reasoning, "thought": True})
            parts.append({"text": step.text})
        else:
            assert isinstance(step, Shell)
            call = {"name": "run_shell_command", "args": {"command": step.command}}
            parts = [{"functionCall": call}]
        yield sse_data(_response(parts, "STOP", usage=True))


def _response(
    parts: list[dict[str, Any]], finish: str | None, usage: bool = False
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    answer: dict[str, Any] = {"candidates": [candidate], "modelVersion": MODEL}
    if usage:
        answer["usageMetadata"] = {
            "promptTokenCount": USAGE["prompt"],
            "candidatesTokenCount": USAGE["candidates"],
            "cachedContentTokenCount": USAGE["cached"],
            "totalTokenCount": USAGE["prompt"] + USAGE["candidates"],
        }
    return answer


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    for tool in tools or []:
        for declaration in (tool or {}).get("functionDeclarations") or []:
            names.append(str(declaration.get("name")))
    return names


def _has_part(content: Any, key: str) -> bool:
    parts = content.get("parts") if isinstance(content, dict) else None
    return any(isinstance(p, dict) and key in p for p in parts or [])


def fake_gemini(
    script: Iterable[Step] = (), default: Step | None = None
) -> AbstractAsyncContextManager[FakeGemini]:
    """Serve the fake on a loopback port; requests past the script get `default`."""
    fake = FakeGemini(script, default or Answer())
    return serve_fake(fake, Route("/v1beta/models/{rest:path}", fake.models, methods=["POST"]))


def gemini_home(path: Path) -> Path:
    """A `GEMINI_CLI_HOME` whose settings pick API-key auth, with telemetry and updates off."""
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "model": {"name": MODEL},
    }
    folder = path / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings, indent=2))
    return path


def gemini_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for Gemini CLI with a fresh HOME and GEMINI_CLI_HOME under `root`."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    return cli_env(
        home,
        extra,
        GEMINI_CLI_HOME=str(gemini_home(root / "gemini-home")),
        GEMINI_API_KEY="fake-gemini-key-for-tests",
        GOOGLE_GEMINI_BASE_URL=base_url,
    )
