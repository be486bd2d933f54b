"""The DeepSeek Harness backend: `dsh --profile multica --stdio`, one request per process.

    dsh --profile multica --stdio [configured args]
    stdin:  {"v":1,"type":"execute","request_id":TASK,"cwd":DIR,"prompt":...,
             "resume_session_id":S,"model":{"provider":P,"id":M},"reasoning_effort":LEVEL,
             "mcp_servers":[...]}

The Multica runtime profile (a bundle installed into dsh with `dsh plugin --profile multica
add <bundle>`) gives dsh the stdio protocol: one execute command in, versioned JSONL frames
out (`backends.dsh.frames`). A bare dsh has no such mode, so the backend is offered only when
`dsh --profile multica --probe` answers with a probe frame (as Multica's daemon checks). The
model is `provider/id` as dsh lists it (each part URL-escaped); an MCP configuration in the
spec is handed over as the request's servers (stdio and streamable HTTP; SSE is refused by
dsh). Stdin stays open until the result, then closes, and dsh exits.

The bundle is not served by a registry, so the tests run the parser and the probe on frames of
the documented protocol, written by a stand-in executable.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any
from urllib.parse import unquote

from backends.agent_cli import AgentCli
from backends.base import AgentRun, RunSpec
from backends.dsh.frames import PROTOCOL_VERSION, DshFrameParser
from backends.dsh.models import dsh_models
from backends.dsh.probe import probe
from backends.models import Catalog
from backends.process import ProcessSpec
from backends.resume import Launch, start_session

PROFILE = "multica"
LAUNCH_ARGS = ("--profile", PROFILE, "--stdio")


class DshBackend(AgentCli):
    """Runs DeepSeek Harness's Multica runtime for a task, resuming its session when asked."""

    name = "dsh"

    async def detect(self) -> str | None:
        """The version, when the Multica runtime profile answers its probe; else None."""
        version = await super().detect()
        if version is None:
            return None
        env = {**self.strip_markers(self._env()), **self.probe_env}
        if not await probe(self.command("--profile", PROFILE, "--probe"), env, self._detect_as):
            self.version = ""
            return None
        return version

    async def models(self) -> Catalog:
        """The models the runtime profile lists (`backends.dsh.models`)."""
        return await dsh_models(self, PROFILE)

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the runtime; leaving the context kills its process tree."""
        return self._run(spec)

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        request_id = spec.task_id or "multica"
        model = model_selection(spec.model or self.model)

        def launch(resume: str) -> Launch:
            command = execute_command(spec, request_id, resume, model)
            line = (json.dumps(command) + "\n").encode()
            argv = self.command(*LAUNCH_ARGS, *self.args)
            env = self.strip_markers(spec.env)
            parser = DshFrameParser(request_id, resume, self.version, self.tested_max)
            return ProcessSpec.for_run(spec, argv, env, line, keep_stdin_open=True), parser

        async with start_session(self.name, spec.resume_session_id, launch) as run:
            yield run


def execute_command(
    spec: RunSpec, request_id: str, resume: str, model: Mapping[str, str] | None
) -> dict[str, Any]:
    """The one `execute` frame a run sends."""
    command: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "type": "execute",
        "request_id": request_id,
        "cwd": str(spec.workdir),
        "prompt": spec.prompt,
        "mcp_servers": mcp_servers(spec.mcp),
    }
    if resume:
        command["resume_session_id"] = resume
    if model:
        command["model"] = dict(model)
    if spec.thinking_level:
        command["reasoning_effort"] = spec.thinking_level
    return command


def model_selection(value: str) -> dict[str, str] | None:
    """`provider/id` (each part URL-escaped) as dsh's model selection; None for "".

    A model not in that form is refused: dsh would not know which provider serves it."""
    value = value.strip()
    if not value:
        return None
    provider, _, model = value.partition("/")
    provider, model = unquote(provider).strip(), unquote(model).strip()
    if not provider or not model:
        raise ValueError(f"dsh model {value!r} must be the provider/model id dsh lists")
    return {"provider": provider, "id": model}


def mcp_servers(config: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The spec's MCP servers (`mcpServers` of the task's MCP file) as dsh's list."""
    servers = (config or {}).get("mcpServers")
    out: list[dict[str, Any]] = []
    if not isinstance(servers, dict):
        return out
    for name, server in sorted(servers.items()):
        if not isinstance(server, dict):
            continue
        if isinstance(server.get("command"), str):
            args, env = server.get("args"), server.get("env")
            out.append(
                {
                    "name": name,
                    "transport": "stdio",
                    "command": server["command"],
                    "args": [str(a) for a in args] if isinstance(args, list) else [],
                    "env": {str(k): str(v) for k, v in env.items()}
                    if isinstance(env, dict)
                    else {},
                }
            )
        elif isinstance(server.get("url"), str):
            headers = server.get("headers")
            out.append(
                {
                    "name": name,
                    "transport": "streamable-http",
                    "url": server["url"],
                    "headers": {str(k): str(v) for k, v in headers.items()}
                    if isinstance(headers, dict)
                    else {},
                }
            )
    return out
