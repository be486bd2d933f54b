"""Plugins on the Multica-faithful server (Go `plugin_agent_hook.go`, `plugin_mcp.go`).

A claim carries the workspace's agent-trigger hooks as `plugin_hook_tools` (and, with remote MCP
connections, a task-scoped `remote_mcp_daemon_token`: multica_routes.py). `POST
/api/daemon/tasks/{id}/plugin-hooks` `{installation_id, hook_key, input}` makes the hook call
for a daemon: an installation outside the task's workspace is a 404; a hook that fails or is
refused is a 200 with `{status, error}`, one that works `{status: "ok", output}`. `GET
/api/daemon/tasks/{id}/plugin-mcp/{contribution}/credential` serves a plugin connection's
credential (`plugin:<installation>:<hook>`, anything else a 400). There is no `remote-mcp/`
route (a workspace's own connection): Multica's router has none. Both routes take the daemon's
token or the task's minted daemon token.

    fake.install_hook("inst-1", "notify", answer=lambda input: {"sent": True})
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from tests.fakes.multica_routes import SeenRequest, error, route_of

if TYPE_CHECKING:
    from tests.fakes.multica_server import MulticaFake

Answer = Callable[[Any], Any]
"""A hook: its input → its output, or raises `HookFailed`."""


class HookFailed(Exception):
    """The plugin's endpoint failed, or the server refused the call: a 200 with the error."""


@dataclass
class Plugins:
    """The installations of the fake's workspaces and every hook call made."""

    hooks: dict[tuple[str, str], tuple[str, Answer]] = field(default_factory=dict)
    """(installation, hook key) → (workspace, answer)."""
    credentials: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(installation, hook key) → (header, value) of an `mcp` hook."""
    calls: list[dict[str, Any]] = field(default_factory=list)
    """Every hook call: task, installation, hook key, input and the token it came with."""
    credential_asks: list[dict[str, Any]] = field(default_factory=list)


class PluginHandlers:
    """`InvokeAgentPluginHook`, `ResolvePluginMCPCredential`."""

    def __init__(self, fake: MulticaFake) -> None:
        self.fake = fake

    def _allowed(self, request: Request, task_token: str) -> bool:
        """The daemon's own token (none when the fake has none), or the task's daemon token."""
        sent = request.headers.get("authorization")
        own = f"Bearer {self.fake.token}" if self.fake.token else None
        return sent == own or (bool(task_token) and sent == f"Bearer {task_token}")

    async def invoke(self, request: Request) -> JSONResponse:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.fake.requests.append(SeenRequest(route_of(request.url.path), request.url.path, body))
        task = self.fake.tasks.get(request.path_params["id"])
        if task is None:
            return error(404, "task not found")
        if not self._allowed(request, task.daemon_token):
            return error(401, "invalid token")
        if not isinstance(body, dict):
            return error(400, "invalid request body")
        installation, hook = body.get("installation_id"), body.get("hook_key")
        if not installation or not hook:
            return error(400, "installation_id and hook_key are required")
        found = self.fake.plugins.hooks.get((installation, hook))
        self.fake.plugins.calls.append(
            {
                "task_id": task.id,
                "installation_id": installation,
                "hook_key": hook,
                "input": body.get("input"),
                "authorization": request.headers.get("authorization", ""),
            }
        )
        if found is None or found[0] != task.workspace_id:
            return error(404, "plugin not found")
        try:
            output = found[1](body.get("input"))
        except HookFailed as exc:
            return JSONResponse({"status": "failed", "error": str(exc)})
        return JSONResponse({"status": "ok", "output": output})

    async def credential(self, request: Request) -> JSONResponse:
        self.fake.requests.append(SeenRequest("credential", request.url.path, None))
        task = self.fake.tasks.get(request.path_params["id"])
        if task is None:
            return error(404, "task not found")
        if not self._allowed(request, task.daemon_token):
            return error(401, "invalid token")
        contribution = request.path_params["cid"]
        self.fake.plugins.credential_asks.append({"task_id": task.id, "contribution": contribution})
        prefix, _, rest = contribution.partition(":")
        installation, _, hook = rest.partition(":")
        if prefix != "plugin" or not installation or not hook:
            return error(400, "malformed contribution id")
        found = self.fake.plugins.credentials.get((installation, hook))
        if found is None:
            return error(404, "plugin not found")
        return JSONResponse({"credential_header": found[0], "credential": found[1]})
