"""A remote MCP server over HTTPS on loopback, for the daemon's broker: the streamable HTTP
transport as a plugin's or a workspace's MCP server speaks it.

It demands a credential header, hands out a session id on `initialize` and wants it back,
lists two tools (`search`, which an administrator approves, and `delete`, which nobody did)
and answers `tools/call` with what it was called with. Test controls: `drift` changes
`search`'s schema after approval, `sse` answers as an event stream. Every request is kept.

    async with remote_mcp(tmp_path) as server:
        ... MULTICA_PLUGIN_DEV_ORIGINS=server.origin, MULTICA_PLUGIN_DEV_CA=server.ca_file ...
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from daemon.task.mcp.schema import digest
from tests.fakes.loopback import serve_app

CREDENTIAL = ("X-Api-Key", "remote-secret")
SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"q": {"type": "string", "description": "what to look for"}},
    "required": ["q"],
}
DELETE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"id": {"type": "string"}}}


@dataclass
class RemoteMcp:
    """The server's state, its address and the CA its certificate is issued by."""

    ca_file: Path
    url: str = ""
    session: str = "session-1"
    drift: bool = False
    sse: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def origin(self) -> str:
        """`https://127.0.0.1:<port>`, as MULTICA_PLUGIN_DEV_ORIGINS names it."""
        return self.url.rsplit("/", 1)[0]

    def connection(self, contribution_id: str, **fields: Any) -> dict[str, Any]:
        """The claim's `remote_mcp_connections` entry for this server, `search` approved."""
        return {
            "installation_id": "inst-remote",
            "contribution_id": contribution_id,
            "contribution_key": "Metrics",
            "endpoint": self.url,
            "transport": "streamable_http",
            "protocol_versions": ["2025-03-26"],
            "credential_header": CREDENTIAL[0],
            "approved_tools": [
                {
                    "name": "search",
                    "description": "Search the metrics",
                    "input_schema": SEARCH_SCHEMA,
                    "schema_digest": digest(SEARCH_SCHEMA),
                }
            ],
            "failure_policy": "required",
            **fields,
        }

    def calls(self, method: str) -> list[dict[str, Any]]:
        """The requests of one JSON-RPC method, in order."""
        return [r for r in self.requests if r["body"].get("method") == method]

    async def handle(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append({"headers": dict(request.headers), "body": body})
        if request.headers.get(CREDENTIAL[0].lower()) != CREDENTIAL[1]:
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        method = body.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "metrics", "version": "1"},
            }
            return self._answer(body, result, {"mcp-session-id": self.session})
        if request.headers.get("mcp-session-id") != self.session:
            return JSONResponse({"error": "no session"}, status_code=400)
        if "id" not in body:
            return Response(status_code=202)
        if method == "tools/list":
            search = {**SEARCH_SCHEMA, "required": []} if self.drift else SEARCH_SCHEMA
            tools = [
                {"name": "search", "description": "upstream words", "inputSchema": search},
                {"name": "delete", "description": "Delete a series", "inputSchema": DELETE_SCHEMA},
            ]
            return self._answer(body, {"tools": tools})
        if method == "tools/call":
            text = f"searched {json.dumps(body['params'].get('arguments'))}"
            return self._answer(body, {"content": [{"type": "text", "text": text}]})
        return self._answer(body, {})

    def _answer(
        self, body: dict[str, Any], result: dict[str, Any], headers: dict[str, str] | None = None
    ) -> Response:
        message = json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": result})
        if self.sse:
            data = f"event: message\ndata: {message}\n\n"
            return Response(data, media_type="text/event-stream", headers=headers)
        return Response(message, media_type="application/json", headers=headers)


def _certificates(home: Path) -> tuple[Path, Path, Path]:
    """A key and certificate for 127.0.0.1, and the CA that issued it, as files."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    home.mkdir(parents=True, exist_ok=True)
    key, chain, ca_file = home / "key.pem", home / "cert.pem", home / "ca.pem"
    cert.private_key_pem.write_to_path(str(key))
    cert.cert_chain_pems[0].write_to_path(str(chain))
    ca.cert_pem.write_to_path(str(ca_file))
    return key, chain, ca_file


@asynccontextmanager
async def remote_mcp(home: Path) -> AsyncIterator[RemoteMcp]:
    """The server on a loopback HTTPS port, its certificate issued by a CA of its own."""
    key, chain, ca_file = _certificates(home)
    server = RemoteMcp(ca_file)
    app = Starlette(routes=[Route("/mcp", server.handle, methods=["POST"])])
    async with serve_app(app, ssl_keyfile=str(key), ssl_certfile=str(chain)) as url:
        server.url = url.replace("http://", "https://") + "/mcp"
        yield server
