"""A task's own MCP servers: the plugin hooks as tools, remote servers behind a broker, both
merged into the agent's MCP configuration — spoken to as an agent's MCP client speaks."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.errors import AgentSetupError
from daemon.protocol.client import HookAnswer
from daemon.protocol.models import Task
from daemon.task.mcp.overlay import task_mcp
from daemon.task.mcp.remote import DevOrigins
from daemon.testing import FakeTaskServer
from tests.fakes.remote_mcp import CREDENTIAL, RemoteMcp, remote_mcp

pytestmark = pytest.mark.anyio
CONTRIBUTION = "plugin:inst-remote:metrics"
HOOKS = [
    {
        "installation_id": "inst-1",
        "hook_key": "notify",
        "name": "deploy_notify",
        "description": "Tell the team",
        "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}},
    },
    {"installation_id": "inst-1", "hook_key": "ping", "name": "deploy_ping", "description": ""},
]


class Mcp:
    """An MCP client of one server URL (JSON-RPC over POST, the session id kept)."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url, self.session = http, url, ""
        self._ids = itertools.count(1)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        headers = {"mcp-session-id": self.session} if self.session else {}
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}
        answer = await self.http.post(self.url, json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        self.session = answer.headers.get("mcp-session-id", self.session)
        if answer.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
            reply: dict[str, Any] = json.loads(data[0])
            return reply
        reply = answer.json()
        return reply


def _task(**fields: Any) -> Task:
    return Task.model_validate(
        {"id": "task-1", "remote_mcp_daemon_token": "mdt_secret", "agent": {}, **fields}
    )


@asynccontextmanager
async def served(
    task: Task, server: FakeTaskServer, backend: str = "claude", dev: DevOrigins | None = None
) -> AsyncIterator[tuple[Task, httpx.AsyncClient]]:
    async with (
        task_mcp(task, backend, server, dev or DevOrigins()) as merged,
        httpx.AsyncClient(timeout=10) as http,
    ):
        yield merged, http


async def test_plugin_hooks_are_tools_whose_calls_go_to_the_server() -> None:
    """`multica-plugins` lists the hooks (a schema-less one gets an empty object), each call
    goes to the server with its arguments, its answer is the tool's text and a failed hook a
    tool error; the server stops with the run."""
    server = FakeTaskServer()
    server.hook_answers["ping"] = HookAnswer(False, "the plugin endpoint is down")
    async with served(_task(plugin_hook_tools=HOOKS), server) as (task, http):
        url = task.agent.mcp_config["mcpServers"]["multica-plugins"]["url"]  # type: ignore[index]
        mcp = Mcp(http, url)
        hello = (await mcp.call("initialize", {"protocolVersion": "2025-06-18"}))["result"]
        listed = (await mcp.call("tools/list"))["result"]["tools"]
        sent = await mcp.call(
            "tools/call", {"name": "deploy_notify", "arguments": {"message": "shipped"}}
        )
        failed = await mcp.call("tools/call", {"name": "deploy_ping"})
        unknown = await mcp.call("tools/call", {"name": "rm_rf"})
    assert hello["protocolVersion"] == "2024-11-05"
    assert hello["serverInfo"] == {"name": "multica-plugins", "version": "1"}
    assert [(t["name"], t["description"]) for t in listed] == [
        ("deploy_notify", "Tell the team"),
        ("deploy_ping", ""),
    ]
    assert listed[0]["inputSchema"] == HOOKS[0]["input_schema"]
    assert listed[1]["inputSchema"] == {"type": "object", "properties": {}}
    assert server.hook_calls == [
        ("task-1", "inst-1", "notify", {"message": "shipped"}),
        ("task-1", "inst-1", "ping", None),
    ]
    assert sent["result"] == {"content": [{"type": "text", "text": '{"message": "shipped"}'}]}
    assert failed["result"]["isError"] is True
    assert failed["result"]["content"][0]["text"] == "the plugin endpoint is down"
    assert unknown["error"]["code"] == -32602
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(url, json={})


async def test_the_servers_join_the_agents_own_configuration() -> None:
    """The agent's own servers stay; a task without any gets one with only ours; a task with
    neither tools nor connections is left as it was."""
    own = {"mcpServers": {"github": {"command": "gh-mcp"}}, "other": 1}
    task = _task(plugin_hook_tools=HOOKS, agent={"mcp_config": own})
    async with served(task, FakeTaskServer()) as (merged, _):
        config = merged.agent.mcp_config
    assert config is not None and config["other"] == 1
    assert set(config["mcpServers"]) == {"github", "multica-plugins"}
    async with served(_task(), FakeTaskServer()) as (plain, _):
        assert plain.agent.mcp_config is None


def _url(task: Task, name: str = "plugin-metrics-plugin:i") -> str:
    """The URL of one of the task's servers, as its MCP configuration names it."""
    assert task.agent.mcp_config is not None
    url: str = task.agent.mcp_config["mcpServers"][name]["url"]
    return url


@asynccontextmanager
async def brokered(
    tmp_path: Path, **connection: Any
) -> AsyncIterator[tuple[RemoteMcp, FakeTaskServer, DevOrigins, Task]]:
    async with remote_mcp(tmp_path / "remote") as remote:
        server = FakeTaskServer()
        server.credentials[CONTRIBUTION] = {CREDENTIAL[0]: CREDENTIAL[1]}
        dev = DevOrigins(frozenset({remote.origin}), remote.ca_file)
        task = _task(remote_mcp_connections=[remote.connection(CONTRIBUTION, **connection)])
        yield remote, server, dev, task


async def test_a_remote_server_is_reached_through_its_broker_with_only_approved_tools(
    tmp_path: Path,
) -> None:
    """Checked at the start (handshake, pinned schema); then the agent sees only `search`, with
    the approved description; its call is passed on with the credential the daemon fetched;
    `delete` and anything but tools are refused without reaching the server."""
    async with (
        brokered(tmp_path) as (remote, server, dev, task),
        served(task, server, dev=dev) as (merged, http),
    ):
        servers = merged.agent.mcp_config["mcpServers"]  # type: ignore[index]
        assert list(servers) == ["plugin-metrics-plugin:i"]
        mcp = Mcp(http, servers["plugin-metrics-plugin:i"]["url"])
        await mcp.call("initialize", {"protocolVersion": "2025-03-26"})
        listed = (await mcp.call("tools/list"))["result"]["tools"]
        found = await mcp.call("tools/call", {"name": "search", "arguments": {"q": "cpu"}})
        before = len(remote.requests)
        refused = await mcp.call("tools/call", {"name": "delete", "arguments": {"id": "x"}})
        other = await mcp.call("resources/list")
        assert len(remote.requests) == before
    assert [(t["name"], t["description"]) for t in listed] == [("search", "Search the metrics")]
    assert found["result"]["content"][0]["text"] == 'searched {"q": "cpu"}'
    (call,) = remote.calls("tools/call")
    assert call["headers"]["x-api-key"] == "remote-secret"
    assert call["headers"]["mcp-session-id"] == "session-1"
    assert refused["error"]["code"] == -32602 and other["error"]["code"] == -32601
    asked = [c for c in server.calls if c.method == "remote_mcp_credential"]
    assert len(asked) == 1 + 3  # at the start, then at each request passed on


async def test_an_event_stream_answer_is_read_too(tmp_path: Path) -> None:
    """A server answering as an event stream is discovered and listed the same."""
    async with brokered(tmp_path) as (remote, server, dev, task):
        remote.sse = True
        async with served(task, server, dev=dev) as (merged, http):
            mcp = Mcp(http, _url(merged))
            await mcp.call("initialize", {"protocolVersion": "2025-03-26"})
            listed = (await mcp.call("tools/list"))["result"]["tools"]
    assert [t["name"] for t in listed] == ["search"]


async def test_a_schema_that_drifted_is_refused(tmp_path: Path) -> None:
    """Drifted before the start: a required connection fails the task, an optional one is
    left out; drifted during the run: the tool list is refused (-32004)."""
    async with brokered(tmp_path) as (remote, server, dev, task):
        remote.drift = True
        with pytest.raises(AgentSetupError, match="Remote MCP Metrics failed startup validation"):
            async with served(task, server, dev=dev):
                pass
    async with brokered(tmp_path / "2", failure_policy="optional") as (remote, server, dev, task):
        remote.drift = True
        async with served(task, server, dev=dev) as (merged, _):
            assert merged.agent.mcp_config is None
    async with (
        brokered(tmp_path / "3") as (remote, server, dev, task),
        served(task, server, dev=dev) as (merged, http),
    ):
        remote.drift = True
        mcp = Mcp(http, _url(merged))
        await mcp.call("initialize", {"protocolVersion": "2025-03-26"})
        drifted = await mcp.call("tools/list")
    assert drifted["error"]["code"] == -32004


async def test_a_revoked_credential_stops_the_next_call(tmp_path: Path) -> None:
    """The credential is asked for at each request: revoked mid-run, the call is refused
    (-32005) without reaching the server."""
    async with (
        brokered(tmp_path) as (remote, server, dev, task),
        served(task, server, dev=dev) as (merged, http),
    ):
        del server.credentials[CONTRIBUTION]
        before = len(remote.requests)
        refused = await Mcp(http, _url(merged)).call("tools/list")
    assert refused["error"]["code"] == -32005 and len(remote.requests) == before


@pytest.mark.parametrize(
    ("backend", "dev_origin", "words"),
    [
        ("codex", True, "incompatible with provider codex"),
        ("claude", False, "endpoint host is not public"),
    ],
)
async def test_a_connection_that_cannot_be_used_fails_a_required_one(
    tmp_path: Path, backend: str, dev_origin: bool, words: str
) -> None:
    """A provider the daemon gives no MCP servers to, or a loopback endpoint no operator
    named: the task fails before its agent runs."""
    async with brokered(tmp_path) as (_, server, dev, task):
        origins = dev if dev_origin else DevOrigins()
        with pytest.raises(AgentSetupError, match=words):
            async with served(task, server, backend, origins):
                pass
