"""Codex's tool items as the daemon's tool_use and tool_result messages.

`exec --json` and `app-server` report the same four tool items (a shell command, a patch, an
MCP call, a web search): the first in snake_case, the second in camelCase. A `ToolItems`
names one dialect's spellings; reading an item is the same for both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from backends.base import Message, MessageType
from backends.json_lines import str_field


@dataclass(frozen=True)
class ToolItems:
    """One dialect's tool items: item type → tool name, and the command's output keys."""

    tools: Mapping[str, str]
    output_key: str
    exit_code_key: str

    def __contains__(self, kind: str) -> bool:
        return kind in self.tools

    def messages(
        self, phase: str, kind: str, item: Mapping[str, Any], started: set[str]
    ) -> list[Message]:
        """A tool item's messages: its tool_use as it starts (its id kept in `started`), its
        tool_result as it completes, a tool_use first if its start was not seen."""
        item_id = str_field(item.get("id"))
        if phase == "started":
            started.add(item_id)
            return [self.tool_use(kind, item)]
        if phase != "completed":
            return []
        before = [] if item_id in started else [self.tool_use(kind, item)]
        started.discard(item_id)
        return [*before, self.tool_result(kind, item)]

    def tool_use(self, kind: str, item: Mapping[str, Any]) -> Message:
        tool = self.tools[kind]
        arguments: dict[str, Any]
        if tool == "shell":
            arguments = {"command": str_field(item.get("command"))}
        elif tool == "apply_patch":
            arguments = {"changes": item.get("changes") or []}
        elif tool == "mcp":
            tool = f"{str_field(item.get('server'))}.{str_field(item.get('tool'))}"
            raw = item.get("arguments")
            arguments = raw if isinstance(raw, dict) else {"arguments": raw}
        else:
            arguments = {"query": str_field(item.get("query"))}
        return Message(
            MessageType.TOOL_USE, tool=tool, call_id=str_field(item.get("id")), input=arguments
        )

    def tool_result(self, kind: str, item: Mapping[str, Any]) -> Message:
        tool = self.tools[kind]
        status = str_field(item.get("status"))
        failed = status in ("failed", "declined")
        if tool == "shell":
            output = str_field(item.get(self.output_key))
            exit_code = item.get(self.exit_code_key)
            failed = failed or (isinstance(exit_code, int) and exit_code != 0)
        elif tool == "apply_patch":
            changes = item.get("changes") or []
            output = "\n".join(
                f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes if isinstance(c, dict)
            )
        elif tool == "mcp":
            error = item.get("error")
            failed = failed or bool(error)
            output = json.dumps(error if error else item.get("result"))
        else:
            output = str_field(item.get("query"))
        return Message(
            MessageType.TOOL_RESULT,
            call_id=str_field(item.get("id")),
            output=output,
            is_error=failed,
        )


EXEC_ITEMS = ToolItems(
    tools={
        "command_execution": "shell",
        "file_change": "apply_patch",
        "mcp_tool_call": "mcp",
        "web_search": "web_search",
    },
    output_key="aggregated_output",
    exit_code_key="exit_code",
)
"""`codex exec --json`'s items."""
APP_SERVER_ITEMS = ToolItems(
    tools={
        "commandExecution": "shell",
        "fileChange": "apply_patch",
        "mcpToolCall": "mcp",
        "webSearch": "web_search",
    },
    output_key="aggregatedOutput",
    exit_code_key="exitCode",
)
"""`codex app-server`'s items."""
