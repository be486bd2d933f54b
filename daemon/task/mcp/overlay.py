"""One task's MCP servers besides its agent's own: started before its MCP file is written,
stopped when its run ends, merged into its configuration as Multica's daemon merges them.

Each remote connection is checked before the agent starts — the provider can take MCP servers
from the daemon, its credential can be had, its endpoint answers MCP, every approved tool is
offered with the schema approved — and gets a loopback broker named
`plugin-<contribution key>-<8 characters of its id>`; one that fails is left out with a
warning when it is `optional`, else the task fails before its agent runs. The plugin hooks get
`multica-plugins`, and a failure there only costs the tools: an agent that cannot reach a
plugin still works on its issue. The servers join the agent's `mcp_config` (theirs win a
name), and a task whose agent had none gets one holding only them — which, as in Multica,
makes it the agent's whole set of servers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio

from daemon.errors import AgentSetupError, ServerError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer
from daemon.protocol.models import RemoteMcpConnection, Task
from daemon.task.mcp.broker import Broker
from daemon.task.mcp.loopback import Handler, LoopbackEndpoint
from daemon.task.mcp.plugin_tools import SERVER_NAME, PluginTools
from daemon.task.mcp.remote import (
    DevOrigins,
    RemoteMcpError,
    check_endpoint,
    discover,
    http_client,
)

log = logging.getLogger(__name__)

BROKER_BACKENDS = frozenset({"claude", "qoder", "mcode"})
"""Agents that take remote MCP servers: Go's list, less what this daemon gives no MCP
configuration to (Codex, Hermes)."""
_NOT_NAME = re.compile(r"[^a-z0-9_-]")


@asynccontextmanager
async def task_mcp(
    task: Task, backend: str, client: TaskServer, dev: DevOrigins
) -> AsyncIterator[Task]:
    """The task with its servers in its `mcp_config`; they serve until the block ends (the
    stand-alone form of `start_mcp`: an error comes out of its task group as itself)."""
    try:
        async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
            yield await start_mcp(task, backend, client, dev, tg, stack)
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) != 1:
            raise
        raise group.exceptions[0] from None


async def start_mcp(
    task: Task,
    backend: str,
    client: TaskServer,
    dev: DevOrigins,
    tg: anyio.abc.TaskGroup,
    stack: AsyncExitStack,
) -> Task:
    """The task with its servers in its `mcp_config`, serving in `tg` (their clients closed
    by `stack`). AgentSetupError when a required remote connection cannot be used."""
    handlers: dict[str, Handler] = {}
    for connection in task.remote_mcp_connections:
        try:
            broker = await _broker(task, connection, backend, client, dev, stack)
        except RemoteMcpError as exc:
            text = f"Remote MCP {connection.contribution_key} {exc}"
            if connection.failure_policy == "optional":
                log.warning("task %s: %s; left out", short_id(task.id), text)
                continue
            raise AgentSetupError(text) from None
        handlers[server_name(connection)] = broker.handle
    if task.plugin_hook_tools:
        handlers[SERVER_NAME] = PluginTools(task, client).handle
    servers = {
        name: {"type": "http", "url": await _serve(tg, name, handler)}
        for name, handler in handlers.items()
    }
    if servers:
        log.info("task %s: MCP servers of the daemon: %s", short_id(task.id), ", ".join(servers))
    return with_servers(task, servers)


async def _serve(tg: anyio.abc.TaskGroup, name: str, handler: Handler) -> str:
    url = await tg.start(LoopbackEndpoint(name, handler).serve)
    assert isinstance(url, str)
    return url


async def _broker(
    task: Task,
    connection: RemoteMcpConnection,
    backend: str,
    client: TaskServer,
    dev: DevOrigins,
    stack: AsyncExitStack,
) -> Broker:
    """A broker for the connection, checked end to end before the agent starts."""
    if backend not in BROKER_BACKENDS:
        raise RemoteMcpError(f"is incompatible with provider {backend}")
    endpoint = check_endpoint(connection.endpoint, connection.endpoint_allowed_hosts, dev)
    http = await stack.enter_async_context(http_client(dev, endpoint))
    broker = Broker(task, connection, endpoint, http, client)
    try:
        headers = await broker.credential()
    except ServerError as exc:
        raise RemoteMcpError(f"credential is unavailable: {exc}") from None
    try:
        tools = {
            t.name: t for t in await discover(http, endpoint, connection.protocol_versions, headers)
        }
    except RemoteMcpError as exc:
        raise RemoteMcpError(f"failed startup validation: {exc}") from None
    for approved in connection.approved_tools:
        if approved.name not in tools:
            raise RemoteMcpError(
                f"failed startup validation: approved tool {approved.name!r} is missing"
            )
        if tools[approved.name].digest != approved.schema_digest:
            raise RemoteMcpError(
                f"failed startup validation: approved tool {approved.name!r} schema drifted"
            )
    return broker


def server_name(connection: RemoteMcpConnection) -> str:
    """`plugin-<key>-<8 of the id>`: the name the agent sees the connection's tools under."""
    name = _NOT_NAME.sub("-", connection.contribution_key.lower())
    return f"plugin-{name}-{connection.contribution_id.replace('-', '')[:8]}"


def with_servers(task: Task, servers: dict[str, Any]) -> Task:
    """The task whose agent's `mcp_config` also names `servers` (theirs win a name)."""
    if not servers:
        return task
    base = task.agent.mcp_config or {}
    own = base.get("mcpServers")
    merged = {**base, "mcpServers": {**(own if isinstance(own, dict) else {}), **servers}}
    return task.model_copy(update={"agent": task.agent.model_copy(update={"mcp_config": merged})})
