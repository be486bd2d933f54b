"""A remote MCP server an administrator approved: its address checked, its tools discovered,
each pinned tool's schema compared with the digest that was approved.

As Multica's boundary (`remotemcp`): the endpoint is a public HTTPS URL without user info,
query or fragment, on a host the connection's `endpoint_allowed_hosts` allow (`*.example.com`
for its subdomains), whose every address is public (no private, loopback, link-local,
multicast, shared or documentation range) — checked again at each connection, which goes to
the address checked, the certificate still verified for the host name. An operator may name
exact origins (`MULTICA_PLUGIN_DEV_ORIGINS`) that skip only the public-address rule, with a CA
of their own (`MULTICA_PLUGIN_DEV_CA`), for a plugin author's server on their own machine. No
proxy from the environment, no redirect, 10 s to connect, 30 s a call, 4 MiB an answer.

Each tool's schema is hashed as Multica pins it (schema.py).
"""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx

from daemon.config import Settings
from daemon.protocol import jsonin
from daemon.task.mcp.schema import digest

SUPPORTED_VERSIONS = ("2025-03-26", "2024-11-05")
MAX_ANSWER = 4 << 20
CONNECT_WITHIN = 10.0
CALL_WITHIN = 30.0
_BLOCKED = tuple(
    ipaddress.ip_network(n)
    for n in (
        "100.64.0.0/10",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "2001:db8::/32",
        "fc00::/7",
        "fe80::/10",
    )
)


class RemoteMcpError(Exception):
    """A remote MCP server that may not be used, or did not answer as MCP."""


@dataclass(frozen=True, slots=True)
class DevOrigins:
    """Origins an operator named for plugin development, and the CA trusted for them."""

    origins: frozenset[str] = frozenset()
    ca_file: Path | None = None

    @classmethod
    def of(cls, settings: Settings) -> DevOrigins:
        """The operator's (MULTICA_PLUGIN_DEV_ORIGINS, MULTICA_PLUGIN_DEV_CA)."""
        ca = Path(settings.plugin_dev_ca) if settings.plugin_dev_ca else None
        return cls(frozenset(settings.plugin_dev_origins), ca)

    def allows(self, url: httpx.URL) -> bool:
        """Whether `url`'s exact origin (scheme, host, port as written) is named."""
        netloc = url.netloc.decode("ascii", "replace")
        return f"{url.scheme}://{netloc}" in self.origins


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A checked endpoint: the URL as approved, and whether it is a named dev origin."""

    url: httpx.URL
    dev: bool


def check_endpoint(raw: str, allowed: list[str], dev: DevOrigins) -> Endpoint:
    """The endpoint when its form and host may be used (its addresses: `address`)."""
    try:
        url = httpx.URL(raw.strip())
    except (httpx.InvalidURL, ValueError) as exc:
        raise RemoteMcpError(f"parse endpoint: {exc}") from None
    host = url.host.lower().rstrip(".")
    if dev.allows(url):
        if allowed and not _host_allowed(host, allowed):
            raise RemoteMcpError("endpoint host is outside the Plugin endpoint policy")
        return Endpoint(url, True)
    if url.scheme != "https" or not host or url.userinfo or url.fragment or url.query:
        raise RemoteMcpError(
            "endpoint must be a public HTTPS URL without userinfo, query, or fragment"
        )
    if host == "localhost" or host.endswith(".localhost") or _private_literal(host):
        raise RemoteMcpError("endpoint host is not public")
    if allowed and not _host_allowed(host, allowed):
        raise RemoteMcpError("endpoint host is outside the Plugin endpoint policy")
    return Endpoint(url, False)


async def address(endpoint: Endpoint) -> str:
    """The address to connect to: the host's first, once every one it resolves to is public
    (a dev origin's need not be)."""
    url = endpoint.url
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        found = await anyio.getaddrinfo(url.host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise RemoteMcpError(f"resolve endpoint host: {exc}") from None
    addresses = [str(info[4][0]) for info in found]
    if not addresses:
        raise RemoteMcpError("resolve endpoint host: no address")
    for text in addresses:
        if not endpoint.dev and not is_public(text):
            raise RemoteMcpError(f"endpoint host resolves to non-public address {text}")
    return addresses[0]


def is_public(text: str) -> bool:
    """Whether the address is on the public internet (IPv4 in IPv6 judged as IPv4)."""
    ip = ipaddress.ip_address(text.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not ip.is_global or ip.is_multicast or ip.is_unspecified:
        return False
    return not any(ip in net for net in _BLOCKED if net.version == ip.version)


def _private_literal(host: str) -> bool:
    """An address written as the host, not a public one (a name is resolved later)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return not is_public(host)


def _host_allowed(host: str, policies: list[str]) -> bool:
    for policy in policies:
        policy = policy.lower().rstrip(".")
        if host == policy:
            return True
        if policy.startswith("*.") and host.endswith(policy[1:]) and host != policy[2:]:
            return True
    return False


def http_client(dev: DevOrigins, endpoint: Endpoint) -> httpx.AsyncClient:
    """A client for one endpoint: no proxy, no redirect, bounded; a dev origin's certificate
    checked against its own CA."""
    verify: ssl.SSLContext | bool = True
    if endpoint.dev and dev.ca_file is not None:
        verify = ssl.create_default_context(cafile=str(dev.ca_file))
    timeout = httpx.Timeout(CALL_WITHIN, connect=CONNECT_WITHIN)
    return httpx.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=timeout, verify=verify
    )


@dataclass(frozen=True, slots=True)
class Answer:
    """An upstream answer, read whole within `MAX_ANSWER`."""

    status: int
    headers: httpx.Headers
    body: bytes


async def post(
    client: httpx.AsyncClient, endpoint: Endpoint, body: bytes, headers: Mapping[str, str]
) -> Answer:
    """One POST to the endpoint, at the address checked now, with the host's name kept for
    the `Host` header and the certificate."""
    url = endpoint.url
    ip = await address(endpoint)
    pinned = url.copy_with(host=ip)
    sent = {
        **headers,
        "host": url.netloc.decode("ascii"),
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    request = client.build_request("POST", pinned, content=body, headers=sent)
    request.extensions["sni_hostname"] = url.host
    try:
        response = await client.send(request, stream=True)
    except httpx.HTTPError as exc:
        raise RemoteMcpError(f"Remote MCP service is unavailable: {exc}") from None
    try:
        data = b""
        async for chunk in response.aiter_raw():
            data += chunk
            if len(data) > MAX_ANSWER:
                raise RemoteMcpError("Remote MCP response exceeded the allowed limit")
    except httpx.HTTPError as exc:
        raise RemoteMcpError(f"Remote MCP service is unavailable: {exc}") from None
    finally:
        await response.aclose()
    return Answer(response.status_code, response.headers, data)


def message_of(answer: Answer) -> Any:
    """The JSON-RPC message of an answer: its body, or an event stream's first `data:`."""
    body = answer.body
    if answer.headers.get("content-type", "").lower().startswith("text/event-stream"):
        for line in body.split(b"\n"):
            if line.startswith(b"data:") and line[5:].strip():
                body = line[5:].strip()
                break
        else:
            raise RemoteMcpError("Remote MCP SSE response contained no data")
    try:
        return jsonin.loads(body, limit=MAX_ANSWER, what="a remote MCP answer")
    except ValueError as exc:
        raise RemoteMcpError(f"decode JSON-RPC response: {exc}") from None


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the remote server lists: its name, description, canonical schema, digest."""

    name: str
    description: str
    schema: Any
    digest: str


async def discover(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    versions: list[str],
    headers: Mapping[str, str],
) -> list[Tool]:
    """The server's tools, after an MCP handshake in one of `versions` (empty: ours)."""
    versions = versions or list(SUPPORTED_VERSIONS)
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": versions[0],
            "capabilities": {},
            "clientInfo": {"name": "multica-plugin-review", "version": "1"},
        },
    }
    answer, result = await _call(client, endpoint, hello, headers)
    session = dict(headers)
    if sid := answer.headers.get("mcp-session-id"):
        session["mcp-session-id"] = sid
    if not isinstance(result, dict) or result.get("protocolVersion") not in versions:
        raise RemoteMcpError("remote MCP negotiated an unsupported protocol version")
    done = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}
    said = await post(client, endpoint, json.dumps(done).encode(), session)
    if not 200 <= said.status < 300:
        raise RemoteMcpError(f"remote MCP returned HTTP {said.status}")
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    _, result = await _call(client, endpoint, listing, session)
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        raise RemoteMcpError("decode tools/list result: no tool list")
    found: dict[str, Tool] = {}
    for entry in tools:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.strip() or name in found:
            raise RemoteMcpError("remote MCP returned an invalid or duplicate tool name")
        schema = entry.get("inputSchema")
        schema = {"type": "object"} if schema is None else schema
        found[name] = Tool(name, str(entry.get("description") or ""), schema, digest(schema))
    return sorted(found.values(), key=lambda t: t.name)


async def _call(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    message: dict[str, Any],
    headers: Mapping[str, str],
) -> tuple[Answer, Any]:
    answer = await post(client, endpoint, json.dumps(message).encode(), headers)
    if not 200 <= answer.status < 300:
        raise RemoteMcpError(f"remote MCP returned HTTP {answer.status}")
    reply = message_of(answer)
    if not isinstance(reply, dict):
        raise RemoteMcpError("decode JSON-RPC response: not an object")
    if isinstance(reply.get("error"), dict):
        error = reply["error"]
        raise RemoteMcpError(f"remote MCP error {error.get('code')}: {error.get('message')}")
    return answer, reply.get("result")
