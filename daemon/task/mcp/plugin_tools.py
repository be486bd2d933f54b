"""`multica-plugins`: the workspace's plugin hooks as MCP tools of one task, as Multica's
daemon presents them.

A plugin author writes an HTTP endpoint, not an MCP server: the hook's description becomes the
tool's, its `input_schema` the tool's schema (an object with no properties when it has none).
A call never goes to the plugin from here: it goes to the server (`POST .../plugin-hooks`),
which holds the signing secret and makes the call, so every machine running agents does not
hold a credential for every plugin. A hook that failed or was refused comes back as a tool
error the agent reads and works around, never as a broken server: an unreachable plugin must
not fail the task. Protocol `2024-11-05`; `initialize`, `tools/list`, `tools/call` and `ping`
are answered, a notification gets a 202.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

from daemon.errors import MalformedInputError, ServerError
from daemon.logs import short_id
from daemon.protocol import jsonin
from daemon.protocol.api import TaskServer
from daemon.protocol.models import PluginHookTool, Task
from daemon.task.mcp.loopback import BODY_LIMIT, Request, Response

log = logging.getLogger(__name__)

SERVER_NAME = "multica-plugins"
PROTOCOL_VERSION = "2024-11-05"
CALL_WITHIN = 60.0
"""Seconds one hook call may take, the server's work included."""
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
NOTHING = "The hook completed and returned nothing."


class PluginTools:
    """The MCP handler of one task's plugin hooks."""

    def __init__(self, task: Task, client: TaskServer) -> None:
        self._task = task
        self._client = client
        self.tools: dict[str, PluginHookTool] = {}
        for tool in task.plugin_hook_tools:
            if tool.name in self.tools:
                # The server names them apart; a duplicate anyway must not pick a hook at random.
                log.warning("task %s: plugin tool %r named twice", short_id(task.id), tool.name)
                continue
            self.tools[tool.name] = tool

    async def handle(self, request: Request) -> Response:
        """One JSON-RPC message to the tools."""
        try:
            message = jsonin.loads(request.body, limit=BODY_LIMIT, what="an MCP request")
        except MalformedInputError:
            return _error(None, -32700, "request is not valid JSON-RPC")
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return _error(None, -32600, "request is not valid JSON-RPC")
        ident, method = message.get("id"), message["method"]
        if "id" not in message:
            return Response(202)  # a notification takes no reply
        if method == "initialize":
            return _result(
                ident,
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": SERVER_NAME, "version": "1"},
                },
            )
        if method == "ping":
            return _result(ident, {})
        if method == "tools/list":
            return _result(ident, {"tools": [_listed(t) for t in self.tools.values()]})
        if method == "tools/call":
            return await self._call(ident, message.get("params"))
        return _error(ident, -32601, f"unsupported method {method}")

    async def _call(self, ident: Any, params: Any) -> Response:
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return _error(ident, -32602, "invalid tool call parameters")
        tool = self.tools.get(params["name"])
        if tool is None:
            return _error(ident, -32602, f"unknown tool {params['name']}")
        task = self._task
        try:
            with anyio.fail_after(CALL_WITHIN):
                answer = await self._client.invoke_plugin_hook(
                    task.remote_mcp_daemon_token,
                    task.id,
                    tool.installation_id,
                    tool.hook_key,
                    params.get("arguments"),
                )
        except (ServerError, TimeoutError) as exc:
            ok, text = False, str(exc) or "the plugin hook did not answer in time"
        else:
            ok, text = answer.ok, answer.text
        if not ok:
            log.info("task %s: plugin tool %s failed: %s", short_id(task.id), tool.name, text)
            return _result(ident, {"isError": True, "content": [_text(text)]})
        return _result(ident, {"content": [_text(text or NOTHING)]})


def _listed(tool: PluginHookTool) -> dict[str, Any]:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else EMPTY_SCHEMA
    return {"name": tool.name, "description": tool.description, "inputSchema": schema}


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _result(ident: Any, result: dict[str, Any]) -> Response:
    return _json({"jsonrpc": "2.0", "id": ident, "result": result})


def _error(ident: Any, code: int, message: str) -> Response:
    return _json({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}})


def _json(body: dict[str, Any]) -> Response:
    data = json.dumps(body, ensure_ascii=False).encode()
    return Response(200, data, {"content-type": "application/json"})
