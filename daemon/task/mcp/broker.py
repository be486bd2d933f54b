"""A remote MCP server behind a task's loopback endpoint: only its approved tools, with its
credential added on the way out, as Multica's daemon brokers it.

The agent never holds the credential: the broker asks the server for it at each request
(`GET .../remote-mcp/{id}/credential`, or `plugin-mcp/` for a plugin's), so a credential the
administrator revoked stops working mid-task. Only the handshake, `ping`, `tools/list` and a
`tools/call` of an approved tool pass; the list is cut to the approved tools, each refused
(-32004) when its schema no longer has the digest it was approved with. At most 256 calls a
task and 8 at once; every refusal is a JSON-RPC error, so the agent sees a tool that failed,
never a broken connection.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx

from daemon.errors import MalformedInputError, ServerError
from daemon.logs import short_id
from daemon.protocol import jsonin
from daemon.protocol.api import TaskServer
from daemon.protocol.models import RemoteMcpConnection, Task
from daemon.task.mcp.loopback import BODY_LIMIT, Request, Response
from daemon.task.mcp.remote import Endpoint, RemoteMcpError, message_of, post
from daemon.task.mcp.schema import canonical, digest

log = logging.getLogger(__name__)

MAX_CALLS = 256
MAX_AT_ONCE = 8
ALLOWED = frozenset(
    {"initialize", "notifications/initialized", "notifications/cancelled", "ping"}
    | {"tools/list", "tools/call"}
)
_FORWARDED = ("mcp-session-id", "mcp-protocol-version", "last-event-id")
_RETURNED = ("mcp-session-id", "mcp-protocol-version")


class Broker:
    """The MCP handler of one remote connection of one task."""

    def __init__(
        self,
        task: Task,
        connection: RemoteMcpConnection,
        endpoint: Endpoint,
        client: httpx.AsyncClient,
        server: TaskServer,
    ) -> None:
        self._task = task
        self._connection = connection
        self._endpoint = endpoint
        self._client = client
        self._server = server
        self._calls = 0
        self._at_once = 0
        self._approved = {t.name: t for t in connection.approved_tools}

    async def credential(self) -> dict[str, str]:
        """The connection's credential header now ({} when it needs none)."""
        if not self._connection.credential_header:
            return {}
        task = self._task
        ident = self._connection.contribution_id
        return await self._server.remote_mcp_credential(
            task.remote_mcp_daemon_token, task.id, ident
        )

    async def handle(self, request: Request) -> Response:
        """One JSON-RPC message, passed on when it may be."""
        began, tool, outcome = time.monotonic(), "", "rejected"
        try:
            answer, tool, outcome = await self._handle(request)
            return answer
        finally:
            log.info(
                "task %s: remote MCP %s call %s: %s in %.0f ms",
                short_id(self._task.id),
                self._connection.contribution_key,
                tool or "-",
                outcome,
                (time.monotonic() - began) * 1000,
            )

    async def _handle(self, request: Request) -> tuple[Response, str, str]:
        self._calls += 1
        if self._calls > MAX_CALLS:
            return _error(None, -32002, "Remote MCP task call limit exceeded"), "", "rejected"
        if self._at_once >= MAX_AT_ONCE:
            return _error(None, -32003, "Remote MCP concurrency limit exceeded"), "", "rejected"
        self._at_once += 1
        try:
            return await self._pass(request)
        finally:
            self._at_once -= 1

    async def _pass(self, request: Request) -> tuple[Response, str, str]:
        try:
            message = jsonin.loads(request.body, limit=BODY_LIMIT, what="an MCP request")
        except MalformedInputError:
            return _error(None, -32600, "Remote MCP request is invalid"), "", "rejected"
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            ident = message.get("id") if isinstance(message, dict) else None
            return _error(ident, -32600, "Remote MCP request is invalid"), "", "rejected"
        ident, method, tool = message.get("id"), message.get("method"), ""
        if method not in ALLOWED:
            refusal = "Only approved Remote MCP tools are available"
            return _error(ident, -32601, refusal), "", "rejected"
        if method == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            if not isinstance(name, str) or name not in self._approved:
                return _error(ident, -32602, "Remote MCP tool is not approved"), "", "rejected"
            tool = name
        headers = {k: request.headers[k] for k in _FORWARDED if k in request.headers}
        try:
            headers |= await self.credential()
        except ServerError:
            refusal = "Remote MCP credential is revoked or unavailable"
            return _error(ident, -32005, refusal), tool, "credential_revoked"
        try:
            answer = await post(self._client, self._endpoint, request.body, headers)
        except RemoteMcpError as exc:
            code = -32001 if "limit" in str(exc) else -32000
            return _error(ident, code, str(exc).split(":", 1)[0]), tool, "remote_error"
        if not 200 <= answer.status < 300:
            return (
                _error(ident, -32000, "Remote MCP service returned an error"),
                tool,
                "remote_error",
            )
        body, kind = answer.body, answer.headers.get("content-type", "")
        if method == "tools/list":
            try:
                body = self._approved_only(message_of(answer))
            except RemoteMcpError:
                refusal = "Remote MCP service returned an invalid response"
                return _error(ident, -32000, refusal), tool, "remote_error"
            except ValueError:
                refusal = "Remote MCP tool schema changed and requires review"
                return _error(ident, -32004, refusal), tool, "schema_drift"
            kind = "application/json"
        returned = {k: answer.headers[k] for k in _RETURNED if k in answer.headers}
        if kind:
            returned["content-type"] = kind
        return Response(answer.status, body, returned), tool, "success"

    def _approved_only(self, reply: Any) -> bytes:
        """The tools/list answer cut to the approved tools, each with the schema it was
        approved with (ValueError: one is missing or its schema drifted)."""
        result = reply.get("result") if isinstance(reply, dict) else None
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(result, dict) or not isinstance(tools, list):
            raise ValueError("no tool list")
        schemas = {
            t["name"]: t.get("inputSchema")
            for t in tools
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        }
        kept = []
        for name in sorted(self._approved):
            pinned = self._approved[name]
            if name not in schemas or digest(schemas[name]) != pinned.schema_digest:
                raise ValueError(f"tool {name} drifted")
            schema = json.loads(canonical(schemas[name]))
            kept.append({"name": name, "description": pinned.description, "inputSchema": schema})
        return json.dumps({**reply, "result": {**result, "tools": kept}}).encode()


def _error(ident: Any, code: int, message: str) -> Response:
    body = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
    return Response(200, json.dumps(body).encode(), {"content-type": "application/json"})
