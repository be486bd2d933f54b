"""Plugin hook tools and a remote MCP server, through the daemon, used by the real Claude Code
CLI: the claim's `plugin_hook_tools` and `remote_mcp_connections` become MCP servers the agent
calls like any other tool; each hook call reaches the Multica-faithful server
(`plugin-hooks`), each remote call the remote server with the credential the daemon fetched.

Offline: the model is the fake Anthropic API (tests/fakes/anthropic_api.py) scripted to call
the tools, the remote server an HTTPS MCP server on loopback (tests/fakes/remote_mcp.py) named
as a plugin-development origin; the hook calls are answered by the fake's plugin routes, not
a real plugin (Multica's server makes those calls, signed, and no plugin runs offline).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic_api import Text, ToolUse, claude_env, fake_anthropic
from tests.fakes.multica_plugins import HookFailed
from tests.fakes.multica_server import multica_server
from tests.fakes.real_cli import InstalledCli
from tests.fakes.remote_mcp import remote_mcp
from tests.helpers import running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

HOOKS = [
    {
        "installation_id": "inst-1",
        "hook_key": "notify",
        "name": "deploy_notify",
        "description": "Tell the team a deploy happened",
        "input_schema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
    {
        "installation_id": "inst-1",
        "hook_key": "rollback",
        "name": "deploy_rollback",
        "description": "Roll the deploy back",
    },
]
APPS = [{"provider": "composio", "server_name": "composio-github", "toolkit_slug": "github"}]


def _tool_results(body: dict[str, Any]) -> list[tuple[bool, str]]:
    """(is_error, text) of each tool result the request carries."""
    found = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                inner = block.get("content")
                text = (
                    "".join(p.get("text", "") for p in inner if isinstance(p, dict))
                    if isinstance(inner, list)
                    else str(inner)
                )
                found.append((bool(block.get("is_error")), text))
    return found


async def test_an_agent_calls_plugin_hooks_and_a_brokered_remote_tool(
    claude_cli: InstalledCli, tmp_path: Path
) -> None:
    """The agent sees `mcp__multica-plugins__*` and the remote server's approved tool only;
    a hook's output comes back as its result, a failed hook as a tool error the agent reads
    and goes on from; the remote call carries the credential, which the agent never sees;
    the task completes, and its prompt names the connected apps."""
    contribution = "plugin:inst-remote:metrics"
    async with remote_mcp(tmp_path / "remote") as remote:
        # Go's name, `plugin-<key>-<8 of the id>`; Claude Code writes its `:` as `_`.
        broker = f"plugin-metrics-{contribution.replace('-', '')[:8]}"
        tool_server = broker.replace(":", "_")
        script = [
            ToolUse("", tool="mcp__multica-plugins__deploy_notify", input={"message": "v2 out"}),
            ToolUse("", tool="mcp__multica-plugins__deploy_rollback", input={}),
            ToolUse("", tool=f"mcp__{tool_server}__search", input={"q": "cpu"}),
            Text("All done."),
        ]
        env = {
            "MULTICA_PLUGIN_DEV_ORIGINS": remote.origin,
            "MULTICA_PLUGIN_DEV_CA": str(remote.ca_file),
        }
        async with fake_anthropic(script) as api, multica_server() as fake:
            fake.install_hook("inst-1", "notify", lambda given: {"sent": given["message"]})

            def rollback(_: Any) -> Any:
                raise HookFailed("plugin endpoint returned 503")

            fake.install_hook("inst-1", "rollback", rollback)
            fake.install_hook(
                "inst-remote", "metrics", lambda _: None, credential=("X-Api-Key", "remote-secret")
            )
            async with running_daemon(
                tmp_path / "daemon",
                fake.url,
                base_env=claude_env(api.url, tmp_path / "home"),
                MULTICA_CLAUDE_PATH=claude_cli.path,
                **env,
            ):
                task_id = fake.queue_issue(
                    provider="claude",
                    prompt="Deploy, tell the team, check the metrics.",
                    plugin_hook_tools=HOOKS,
                    remote_mcp_connections=[remote.connection(contribution)],
                    connected_apps=APPS,
                )
                task = await fake.finished(task_id, within=120)
    assert task.status == "completed", task.error
    assert task.output == "All done."
    # Claude Code lists MCP tools for its tool search (their schemas load on use).
    offered = set(re.findall(r"mcp__[\w:.-]+", json.dumps(api.main_requests()[0].body)))
    assert offered == {
        "mcp__multica-plugins__deploy_notify",
        "mcp__multica-plugins__deploy_rollback",
        f"mcp__{tool_server}__search",  # not `delete`: nobody approved it
    }
    calls = fake.plugins.calls
    assert [(c["hook_key"], c["input"]) for c in calls] == [
        ("notify", {"message": "v2 out"}),
        ("rollback", {}),
    ]
    token = fake.tasks[task_id].daemon_token
    assert token and {c["authorization"] for c in calls} == {f"Bearer {token}"}
    results = _tool_results(api.main_requests()[-1].body)
    assert results[0] == (False, json.dumps({"sent": "v2 out"}, separators=(",", ":")))
    assert results[1][0] is True and results[1][1].startswith("plugin endpoint returned 503")
    assert results[2] == (False, 'searched {"q": "cpu"}')
    (call,) = remote.calls("tools/call")
    assert call["headers"]["x-api-key"] == "remote-secret"
    assert "remote-secret" not in json.dumps([r.body for r in api.requests])
    assert token not in json.dumps([r.body for r in api.requests])
    first = json.dumps(api.main_requests()[0].body["messages"])
    assert "## Connected Apps" in first and "GitHub (`github`) via MCP server" in first
