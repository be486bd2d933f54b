"""A scriptable fake of the OpenAI Chat Completions API, for OpenCode, Pi and Qwen Code run
offline.

OpenCode reaches it through an `@ai-sdk/openai-compatible` provider whose `baseURL` is this
server (`opencode_config`), Pi through its `models.json` (`pi_env`), Qwen Code through its
OpenAI variables (`qwen_env`). Each streamed `POST /v1/chat/completions` that offers tools
(the agent's own turns) takes the next step of the script — the steps of the Responses fake:
`Answer`, `Shell` (a call of the shell tool the request offers: `SHELL_TOOLS`), `Stall`
(`no-bytes`, or `first-chunk`: one text chunk, then nothing) and `ApiError`. A request
without tools (the session title) gets a short answer and is logged as a side request.

    async with fake_chat([Shell("sleep 3"), Answer("done")]) as api:
        env = opencode_env(tmp_path, api.url)
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.cli_env import PLAIN_PATH, cli_env
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
from tests.fakes.real_cli import find_cli

MODEL = "fake-chat"
PROVIDER = "fake"
USAGE = {"prompt_tokens": 120, "completion_tokens": 12, "cached_tokens": 20}
SHELL_TOOLS = (
    "bash",
    "run_shell_command",
    "terminal",
    "run_terminal_command",
    "execute_shell_command",
    "exec",
)
"""The shell tools of the CLIs the fake serves (`bash`: OpenCode, Pi; Qwen Code's own;
Hermes Agent's `terminal`; Grok Build's `run_terminal_command`; QwenPaw's
`execute_shell_command`; OpenClaw's `exec`)."""
SIDE_TOOLS = frozenset({"session_title"})
"""Tools only a side request offers (Grok Build names its session with one): such a request is
not the conversation, and does not take the script's next step."""

__all__ = ["MODEL", "USAGE", "Answer", "ApiError", "FakeChat", "Shell", "Stall", "fake_chat"]


class FakeChat(FakeOpenAI):
    """The fake's state (script, request log, URL), answering Chat Completions."""

    async def chat(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = {}
        messages = body.get("messages") or []
        offered = [str((t.get("function") or {}).get("name")) for t in body.get("tools") or []]
        main = bool(set(offered) - SIDE_TOOLS)
        step: Step = self.next_step() if main else Answer("Fake title")
        self.record(
            self.call(
                request,
                "main" if main else "side",
                action=type(step).__name__,
                model=str(body.get("model", "")),
                tools=[str((t.get("function") or {}).get("name")) for t in body.get("tools") or []],
                n_inputs=len(messages),
                n_tool_outputs=sum(
                    isinstance(m, dict) and m.get("role") == "tool" for m in messages
                ),
                body=body,
            )
        )
        if isinstance(step, ApiError):
            error = {"message": step.message, "type": "server_error", "code": None}
            return JSONResponse({"error": error}, status_code=step.status)
        if isinstance(step, Stall) and step.when == "no-bytes":
            await self.closing.wait()
            return Response(status_code=503)
        shell = next((name for name in offered if name in SHELL_TOOLS), "bash")
        described = _takes_description(body.get("tools") or [], shell)
        chunks = self._chunks(step, shell, described)
        return StreamingResponse(chunks, media_type="text/event-stream")

    async def _chunks(
        self, step: Step, shell: str = "bash", described: bool = True
    ) -> AsyncIterator[bytes]:
        chunk_id = "chatcmpl-" + uuid.uuid4().hex[:20]
        if isinstance(step, Stall):
            yield _chunk(chunk_id, {"role": "assistant", "content": "Working on it"})
            await self.closing.wait()
            return
        if isinstance(step, Answer):
            if step.reasoning:
                yield _chunk(chunk_id, {"role": "assistant", "reasoning_content": step.reasoning})
            yield _chunk(chunk_id, {"role": "assistant", "content": step.text})
            finish = "stop"
        else:
            assert isinstance(step, Shell)
            call = {
                "index": 0,
                "id": "call_" + uuid.uuid4().hex[:20],
                "type": "function",
                "function": {
                    "name": shell,
                    "arguments": json.dumps(
                        {"command": step.command, "description": "Run the scripted command"}
                        if described
                        else {"command": step.command}
                    ),
                },
            }
            yield _chunk(chunk_id, {"role": "assistant", "tool_calls": [call]})
            finish = "tool_calls"
        yield _chunk(chunk_id, {}, finish)
        usage = {
            "prompt_tokens": USAGE["prompt_tokens"],
            "completion_tokens": USAGE["completion_tokens"],
            "total_tokens": USAGE["prompt_tokens"] + USAGE["completion_tokens"],
            "prompt_tokens_details": {"cached_tokens": USAGE["cached_tokens"]},
        }
        yield sse_data(
            {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "model": MODEL,
                "created": int(time.time()),
                "choices": [],
                "usage": usage,
            }
        )
        yield b"data: [DONE]\n\n"


def _chunk(chunk_id: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return sse_data(
        {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": MODEL,
            "choices": [choice],
        }
    )


def fake_chat(
    script: Iterable[Step] = (), default: Step | None = None
) -> AbstractAsyncContextManager[FakeChat]:
    """Serve the fake on a loopback port; requests past the script get `default`."""
    fake = FakeChat(script, default or Answer())
    return serve_fake(fake, Route("/v1/chat/completions", fake.chat, methods=["POST"]))


def opencode_config(path: Path, base_url: str) -> Path:
    """An OpenCode config file whose only model is the fake, at `base_url`."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": "sk-fake-key-for-tests"},
                "models": {MODEL: {"name": "Fake chat model"}},
            }
        },
        "model": f"{PROVIDER}/{MODEL}",
        "small_model": f"{PROVIDER}/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        # No git snapshot of the work directory before and after every step: seconds of
        # silence between steps on a loaded machine, and the tests never undo a step.
        "snapshot": False,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path


def opencode_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for OpenCode with a fresh HOME under `root`, its model the fake.

    OpenCode installs `@opencode-ai/plugin` into its config directory, in the background, at
    every start whose lock file does not list it; the config directory here has a lock that
    does, so it never tries (and npm is offline should a later version try anyway)."""
    home = root / "home"
    config_dir = home / ".config" / "opencode"
    (config_dir / "node_modules").mkdir(parents=True, exist_ok=True)
    lock = {"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock))
    return cli_env(
        home,
        extra,
        OPENCODE_CONFIG=str(opencode_config(root / "opencode.json", base_url)),
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_SHARE="1",
        # Features the tests do not use, whose start-up work (indexing the work directory's
        # files, scanning ~/.claude, external skills, plugins, a file watcher) took seconds
        # before the first model call on a loaded machine (the index alone 4 s): long enough
        # to look idle to a 4 s watchdog.
        OPENCODE_DISABLE_FFF="1",
        OPENCODE_DISABLE_CLAUDE_CODE="1",
        OPENCODE_DISABLE_EXTERNAL_SKILLS="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
        OPENCODE_EXPERIMENTAL_DISABLE_FILEWATCHER="1",
        npm_config_offline="true",
    )


def pi_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for Pi with a fresh HOME under `root`, its only model the fake.

    Pi reads custom providers from `models.json` in its agent directory; `PI_OFFLINE` keeps
    it from checking for updates at start."""
    agent_dir = root / "home" / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    provider = {
        "baseUrl": f"{base_url}/v1",
        "api": "openai-completions",
        "apiKey": "sk-fake-key-for-tests",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": MODEL}],
    }
    (agent_dir / "models.json").write_text(json.dumps({"providers": {PROVIDER: provider}}))
    settings = {"defaultProvider": PROVIDER, "defaultModel": MODEL}
    (agent_dir / "settings.json").write_text(json.dumps(settings))
    return cli_env(root / "home", extra, PI_OFFLINE="1")


def omp_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for Oh-My-Pi: Pi's, its files in omp's agent directory (`~/.omp/agent`),
    and the folder of the installed `omp` first on PATH — it runs on the `bun` npm installed
    beside it (`#!/usr/bin/env bun`)."""
    env = pi_env(root, base_url, **extra)
    pi_dir = root / "home" / ".pi" / "agent"
    omp_dir = root / "home" / ".omp" / "agent"
    omp_dir.mkdir(parents=True, exist_ok=True)
    for name in ("models.json", "settings.json"):
        (omp_dir / name).write_text((pi_dir / name).read_text())
    found = find_cli("omp", "MULTICA_TEST_OMP_PATH")
    if found is not None:
        env["PATH"] = f"{Path(found).parent}:{env['PATH']}"
    return env


def _takes_description(tools: list[Any], shell: str) -> bool:
    """Whether the offered shell tool declares a `description` argument (or declares none):
    QwenPaw's refuses an argument it does not declare."""
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == shell:
            schema = function.get("parameters")
            properties = schema.get("properties") if isinstance(schema, dict) else None
            return not isinstance(properties, dict) or "description" in properties
    return True


def hermes_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for Hermes Agent with a fresh HOME under `root`, its model the fake.

    Hermes reads its provider from `~/.hermes/config.yaml`: a `custom` (OpenAI-compatible)
    endpoint at the fake, its key from the environment."""
    home = root / "home"
    (home / ".hermes").mkdir(parents=True, exist_ok=True)
    config = f"model:\n  default: {MODEL}\n  provider: custom\n  base_url: {base_url}/v1\n"
    (home / ".hermes" / "config.yaml").write_text(config)
    return cli_env(home, extra, OPENAI_API_KEY="sk-fake-key-for-tests")


def grok_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for Grok Build with a fresh HOME under `root`, its default model the
    fake: a custom model of its `~/.grok/config.toml` (Chat Completions, a key of its own, so
    no `grok login`), auto-update and telemetry off."""
    home = root / "home"
    (home / ".grok").mkdir(parents=True, exist_ok=True)
    config = (
        '[models]\ndefault = "fake"\n\n'
        f'[model.fake]\nmodel = "{MODEL}"\nbase_url = "{base_url}/v1"\nname = "Fake"\n'
        'api_key = "sk-fake-key-for-tests"\ncontext_window = 100000\n\n'
        "[cli]\nauto_update = false\n\n[features]\ntelemetry = false\n"
    )
    (home / ".grok" / "config.toml").write_text(config)
    return cli_env(home, extra, DISABLE_TELEMETRY="1")


def qwenpaw_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for QwenPaw with a fresh HOME under `root`, its active model the fake:
    a custom provider (its secret store, `~/.qwenpaw.secret/providers/`) with the key."""
    home = root / "home"
    providers = home / ".qwenpaw.secret" / "providers"
    (providers / "custom").mkdir(parents=True, exist_ok=True)
    provider = {
        "id": "fake",
        "name": "Fake",
        "base_url": f"{base_url}/v1",
        "api_key": "sk-fake-key-for-tests",
        "chat_model": "OpenAIChatModel",
        "is_custom": True,
        "extra_models": [{"id": MODEL, "name": "Fake"}],
    }
    (providers / "custom" / "fake.json").write_text(json.dumps(provider))
    (providers / "active_model.json").write_text(
        json.dumps({"provider_id": "fake", "model": MODEL})
    )
    return cli_env(home, extra)


def openclaw_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for OpenClaw with a fresh HOME under `root`, its default model the fake:
    a provider of `~/.openclaw/openclaw.json` (OpenAI Chat Completions, a key of its own), and
    the Node 24 it needs first on PATH (the one installed beside it, if any)."""
    home = root / "home"
    (home / ".openclaw").mkdir(parents=True, exist_ok=True)
    provider = {
        "baseUrl": f"{base_url}/v1",
        "apiKey": "sk-fake-key-for-tests",
        "api": "openai-completions",
        "models": [{"id": MODEL, "name": "Fake"}],
    }
    config = {
        "models": {"providers": {PROVIDER: provider}},
        "agents": {"defaults": {"model": {"primary": f"{PROVIDER}/{MODEL}"}}},
    }
    (home / ".openclaw" / "openclaw.json").write_text(json.dumps(config))
    node = find_cli("node", "MULTICA_TEST_OPENCLAW_NODE")
    if node is None:
        return cli_env(home, extra)
    return cli_env(home, extra, PATH=f"{Path(node).parent}:{PLAIN_PATH}")


def qwen_env(root: Path, base_url: str, **extra: str) -> dict[str, str]:
    """An environment for Qwen Code with a fresh HOME under `root`, its model the fake.

    Qwen Code's OpenAI-compatible provider reads its key, URL and model from the environment;
    the settings file selects that provider, turns off its usage statistics, its update check
    and its managed memory (a subagent that calls the model after every turn, which would take
    the script's next step)."""
    home = root / "home"
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "memory": {"enableManagedAutoMemory": False},
    }
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
    return cli_env(
        home,
        extra,
        OPENAI_API_KEY="sk-fake-key-for-tests",
        OPENAI_BASE_URL=f"{base_url}/v1",
        OPENAI_MODEL=MODEL,
        QWEN_CODE_SUPPRESS_YOLO_WARNING="1",
    )
